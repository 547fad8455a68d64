// Temporary storage for one-shot calls: allocated and freed in stream order from the
// device's memory pool (cudaMallocAsync), so a one-shot call neither synchronises nor keeps memory.
#pragma once

#include <kiln/error.hpp>
#include <kiln/prim/common.hpp>

#include <cuda_runtime_api.h>

#include <string>

namespace kiln::prim::detail {

class StreamTemp {
 public:
  StreamTemp(std::size_t bytes, CUstream stream) : stream_(stream), bytes_(bytes) {
    if (bytes == 0) return;
    const cudaError_t e = cudaMallocAsync(&data_, bytes, stream);
    if (e != cudaSuccess) {
      throw kiln::Error(Errc::driver, "kiln::prim: cudaMallocAsync of " + std::to_string(bytes) +
                                          " bytes of temporary storage failed: " + cudaGetErrorString(e));
    }
  }
  ~StreamTemp() {
    if (data_) cudaFreeAsync(data_, stream_);
  }
  StreamTemp(const StreamTemp&) = delete;
  StreamTemp& operator=(const StreamTemp&) = delete;

  TempStorage storage() const { return {data_, bytes_}; }

 private:
  CUstream stream_;
  void* data_ = nullptr;
  std::size_t bytes_;
};

}  // namespace kiln::prim::detail
