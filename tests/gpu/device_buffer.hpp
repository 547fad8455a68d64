// A device allocation for the tests, through kiln's dlopen'ed driver table.
#pragma once

#include <kiln/driver.hpp>

#include <cstddef>
#include <vector>

namespace kiln::test {

template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t count) : count_(count) {
    kiln::check(kiln::driver().cuMemAlloc(&ptr_, bytes()), "cuMemAlloc");
  }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) {
    kiln::check(kiln::driver().cuMemcpyHtoD(ptr_, host.data(), bytes()), "cuMemcpyHtoD");
    // From pageable memory the copy returns once the bytes are staged, before the DMA has landed, and it
    // is ordered only on the legacy default stream: a kernel on a non-blocking stream could read the
    // buffer first. Wait for the legacy stream, so that a buffer made from host data holds it.
    kiln::check(kiln::driver().cuStreamSynchronize(nullptr), "cuStreamSynchronize");
  }
  ~DeviceBuffer() { kiln::driver().cuMemFree(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  std::vector<T> to_host() const {
    std::vector<T> host(count_);
    kiln::check(kiln::driver().cuMemcpyDtoH(host.data(), ptr_, bytes()), "cuMemcpyDtoH");
    return host;
  }
  CUdeviceptr& ptr() { return ptr_; }
  std::size_t bytes() const { return count_ * sizeof(T); }

 private:
  std::size_t count_;
  CUdeviceptr ptr_ = 0;
};

}  // namespace kiln::test
