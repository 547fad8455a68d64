// A one-shot primitive call's temporary storage, allocated and freed in its stream's order.
#pragma once

#include <kiln/driver.hpp>
#include <kiln/error.hpp>
#include <kiln/prim/storage.hpp>  // header-only: TempStorage

#include <cstddef>
#include <string>

namespace kiln::python {

// Storage when the arrays' library cannot give it (kiln/primitives.py), from the device's memory pool
// (cuMemAllocAsync), as C++'s one-shot functions do. Made with the registry's context current.
class StreamStorage {
 public:
  StreamStorage(std::size_t bytes, CUstream stream) : stream_(stream), bytes_(bytes) {
    if (bytes == 0) return;
    check(driver().cuMemAllocAsync(&data_, bytes, stream), "cuMemAllocAsync of " + std::to_string(bytes) +
                                                              " bytes of temporary storage");
  }
  ~StreamStorage() {
    if (data_) driver().cuMemFreeAsync(data_, stream_);
  }
  StreamStorage(const StreamStorage&) = delete;
  StreamStorage& operator=(const StreamStorage&) = delete;

  prim::TempStorage storage() const { return {reinterpret_cast<void*>(data_), bytes_}; }

 private:
  CUstream stream_;
  std::size_t bytes_;
  CUdeviceptr data_ = 0;
};

}  // namespace kiln::python
