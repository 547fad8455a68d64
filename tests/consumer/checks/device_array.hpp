// A device copy of a host vector, through kiln's driver table (the consumer links no CUDA library).
#pragma once

#include <kiln/driver.hpp>

#include <vector>

namespace consumer {

template <typename T>
class DeviceArray {
 public:
  explicit DeviceArray(const std::vector<T>& host) : size_(host.size()) {
    kiln::check(kiln::driver().cuMemAlloc(&ptr_, bytes()), "cuMemAlloc");
    kiln::check(kiln::driver().cuMemcpyHtoD(ptr_, host.data(), bytes()), "cuMemcpyHtoD");
  }
  ~DeviceArray() { kiln::driver().cuMemFree(ptr_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  std::vector<T> to_host() const {
    std::vector<T> host(size_);
    kiln::check(kiln::driver().cuMemcpyDtoH(host.data(), ptr_, bytes()), "cuMemcpyDtoH");
    return host;
  }
  CUdeviceptr& ptr() { return ptr_; }

 private:
  std::size_t bytes() const { return size_ * sizeof(T); }
  std::size_t size_;
  CUdeviceptr ptr_ = 0;
};

}  // namespace consumer
