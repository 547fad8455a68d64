// Device vectors and random fills for the primitives' benchmark (nvcc only).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <type_traits>
#include <vector>

namespace kiln::bench {

inline void check_cuda(cudaError_t e) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "bench: CUDA error %s\n", cudaGetErrorString(e));
    std::exit(1);
  }
}

template <typename T>
class DeviceVector {
 public:
  explicit DeviceVector(std::size_t n) : n_(n) { check_cuda(cudaMalloc(&p_, n ? n * sizeof(T) : 1)); }
  ~DeviceVector() { cudaFree(p_); }
  DeviceVector(const DeviceVector&) = delete;
  DeviceVector& operator=(const DeviceVector&) = delete;
  T* data() const { return p_; }
  std::size_t size() const { return n_; }
  void upload(const std::vector<T>& h) { check_cuda(cudaMemcpy(p_, h.data(), n_ * sizeof(T), cudaMemcpyHostToDevice)); }
  void copy_from(const DeviceVector& o, cudaStream_t s) {
    check_cuda(cudaMemcpyAsync(p_, o.p_, n_ * sizeof(T), cudaMemcpyDeviceToDevice, s));
  }

 private:
  T* p_ = nullptr;
  std::size_t n_;
};

// Fills on the host (fixed seed) and uploads: the benchmark's inputs are the same every run.
template <typename T>
void fill_random(DeviceVector<T>& v, T lo, T hi, unsigned seed = 42) {
  std::mt19937_64 rng(seed);
  std::vector<T> h(v.size());
  if constexpr (std::is_floating_point_v<T>) {
    std::uniform_real_distribution<T> d(lo, hi);
    for (auto& x : h) x = d(rng);
  } else {
    std::uniform_int_distribution<T> d(lo, hi);
    for (auto& x : h) x = d(rng);
  }
  v.upload(h);
}

// `segments` segments of equal length covering n items: their n + 1 offsets.
inline std::vector<int> equal_offsets(std::size_t n, std::size_t segments) {
  std::vector<int> offsets;
  for (std::size_t i = 0; i <= segments; ++i) offsets.push_back(int(n * i / segments));
  return offsets;
}

}  // namespace kiln::bench
