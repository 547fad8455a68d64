// Temporary storage for one-shot calls: allocated and freed in stream order from the
// device's memory pool (cuMemAllocAsync), so a one-shot call neither synchronises nor keeps memory.
#pragma once

#include <kiln/driver.hpp>
#include <kiln/prim/common.hpp>

#include "driver_calls.cuh"  // driver_call

#include <string>

namespace kiln::prim::detail {

class StreamTemp {
 public:
  StreamTemp(std::size_t bytes, CUstream stream) : stream_(stream), bytes_(bytes) {
    if (bytes == 0) return;
    CUdeviceptr data = 0;
    if (const CUresult e = kiln::driver().cuMemAllocAsync(&data, bytes, stream); e != CUDA_SUCCESS)
      driver_call(e, ("cuMemAllocAsync of " + std::to_string(bytes) + " bytes of temporary storage").c_str());
    data_ = reinterpret_cast<void*>(data);
  }
  ~StreamTemp() {
    if (data_) kiln::driver().cuMemFreeAsync(reinterpret_cast<CUdeviceptr>(data_), stream_);
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
