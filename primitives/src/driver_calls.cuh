// libkiln_prim's CUDA runtime calls sent to the driver: nvcc includes this file before every source of the
// library (-include, primitives/meson.build), so CUB's host dispatch and kiln's own code never reach the
// CUDA runtime linked into the library.
//
// Why: the runtime's first call in a process starts it (0.25-0.55 ms on an H200, of a family's first
// call of 1-2 ms), and under CUDA_MODULE_LOADING=EAGER it loads every fatbin the library registered,
// JIT-compiling their PTX for a newer GPU (105-150 ms). Nothing the library runs needs it: the kernels
// come from kiln's registries and launch through the driver (detail/cub_launch.cuh), and CUB's dispatch
// calls the runtime only for the device, one attribute, launch errors it cannot see (kiln's launcher
// records them), and stream-ordered memsets and copies. docs/DESIGN.md, "Primitives without the CUDA
// runtime". tests/prim_runtime_calls.py checks that no object of the library references another.
#pragma once

#include <kiln/driver.hpp>
#include <kiln/error.hpp>

#include <cuda_runtime_api.h>

#include <string>

namespace kiln::prim::detail {

// A driver call that failed, as kiln's error model says: Errc::driver naming the call and the driver's text.
inline cudaError_t driver_call(CUresult result, const char* call) {
  if (result == CUDA_SUCCESS) return cudaSuccess;
  const char* name = nullptr;
  const char* text = nullptr;
  kiln::driver().cuGetErrorName(result, &name);
  kiln::driver().cuGetErrorString(result, &text);
  throw kiln::Error(Errc::driver, std::string("kiln::prim: ") + call + " failed: " + (name ? name : "?") + " (" +
                                      (text ? text : "unknown error") + ")");
}

}  // namespace kiln::prim::detail

// Launch errors are the launcher's to report (detail/cub_launch.cuh), and there is no runtime state to clear.
inline cudaError_t kiln_prim_no_runtime_error() { return cudaSuccess; }

// The device of the current context: every plan call makes its registry's context current.
inline cudaError_t kiln_prim_get_device(int* device) {
  CUdevice current = 0;
  kiln::prim::detail::driver_call(kiln::driver().cuCtxGetDevice(&current), "cuCtxGetDevice");
  *device = static_cast<int>(current);
  return cudaSuccess;
}

// cudaDeviceAttr and CUdevice_attribute number the same attributes alike (cuda_runtime_api.h, cuda.h).
inline cudaError_t kiln_prim_device_attribute(int* value, cudaDeviceAttr attribute, int ordinal) {
  CUdevice device = 0;
  kiln::prim::detail::driver_call(kiln::driver().cuDeviceGet(&device, ordinal), "cuDeviceGet");
  return kiln::prim::detail::driver_call(
      kiln::driver().cuDeviceGetAttribute(value, static_cast<CUdevice_attribute>(attribute), device),
      "cuDeviceGetAttribute");
}

inline cudaError_t kiln_prim_memset_async(void* device, int value, std::size_t bytes, cudaStream_t stream = nullptr) {
  return kiln::prim::detail::driver_call(
      kiln::driver().cuMemsetD8Async(reinterpret_cast<CUdeviceptr>(device), static_cast<unsigned char>(value), bytes,
                                     stream),
      "cuMemsetD8Async");
}

// Unified addressing: the driver tells host from device memory by the pointers, as the runtime's
// cudaMemcpyDefault does; the kind is not needed.
inline cudaError_t kiln_prim_memcpy_async(void* to, const void* from, std::size_t bytes, cudaMemcpyKind,
                                          cudaStream_t stream = nullptr) {
  return kiln::prim::detail::driver_call(
      kiln::driver().cuMemcpyAsync(reinterpret_cast<CUdeviceptr>(to), reinterpret_cast<CUdeviceptr>(from), bytes,
                                   stream),
      "cuMemcpyAsync");
}

inline cudaError_t kiln_prim_stream_synchronize(cudaStream_t stream) {
  return kiln::prim::detail::driver_call(kiln::driver().cuStreamSynchronize(stream), "cuStreamSynchronize");
}

#define cudaGetLastError kiln_prim_no_runtime_error
#define cudaPeekAtLastError kiln_prim_no_runtime_error
#define cudaGetDevice kiln_prim_get_device
#define cudaDeviceGetAttribute kiln_prim_device_attribute
#define cudaMemsetAsync kiln_prim_memset_async
#define cudaMemcpyAsync kiln_prim_memcpy_async
#define cudaStreamSynchronize kiln_prim_stream_synchronize
