// Temporary storage for one-shot calls: allocated and freed in stream order from the
// device's memory pool (cuMemAllocAsync), so a one-shot call neither synchronises nor keeps memory.
#pragma once

#include <kiln/driver.hpp>
#include <kiln/error.hpp>
#include <kiln/prim/common.hpp>

#include <string>

namespace kiln::prim::detail {

class StreamTemp {
 public:
  StreamTemp(std::size_t bytes, CUstream stream) : stream_(stream), bytes_(bytes) {
    if (bytes == 0) return;
    CUdeviceptr data = 0;
    const CUresult e = kiln::driver().cuMemAllocAsync(&data, bytes, stream);
    if (e != CUDA_SUCCESS) {
      const char* text = nullptr;
      kiln::driver().cuGetErrorString(e, &text);
      throw kiln::Error(Errc::driver, "kiln::prim: cuMemAllocAsync of " + std::to_string(bytes) +
                                          " bytes of temporary storage failed: " + (text ? text : "unknown error"));
    }
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
