// The CUDA driver API, loaded with dlopen so that a program without a GPU driver still starts.
#pragma once

#include <kiln/config.hpp>  // C++20, checked first

#include <cuda.h>

#include <string_view>

namespace kiln {

// X-macro of every driver entry point kiln uses. Each is resolved by the exact symbol its cuda.h
// declaration names (cuMemAlloc -> cuMemAlloc_v2), so a member's type and the ABI behind it always agree.
// (cuGetProcAddress(name, CUDA_VERSION) does not: with CUDA 13.0 it hands back the v13000
// cuCtxSynchronize, which takes a CUcontext, for cuda.h's argument-less cuCtxSynchronize.)
#define KILN_DRIVER_FUNCTIONS(X) \
  X(cuInit)                      \
  X(cuDriverGetVersion)          \
  X(cuGetErrorName)              \
  X(cuGetErrorString)            \
  X(cuDeviceGetCount)            \
  X(cuDeviceGet)                 \
  X(cuDeviceGetName)             \
  X(cuDeviceGetAttribute)        \
  X(cuDeviceTotalMem)            \
  X(cuDevicePrimaryCtxGetState)  \
  X(cuDevicePrimaryCtxRetain)    \
  X(cuDevicePrimaryCtxRelease)   \
  X(cuDevicePrimaryCtxReset)     \
  X(cuCtxPushCurrent)            \
  X(cuCtxPopCurrent)             \
  X(cuCtxSynchronize)            \
  X(cuCtxGetCurrent)             \
  X(cuCtxSetCurrent)             \
  X(cuCtxGetId)                  \
  X(cuCtxGetDevice)              \
  X(cuStreamGetCtx)              \
  X(cuLibraryLoadData)           \
  X(cuLibraryUnload)             \
  X(cuLibraryGetKernel)          \
  X(cuKernelGetFunction)         \
  X(cuLaunchKernel)              \
  X(cuLaunchKernelEx)            \
  X(cuOccupancyMaxActiveBlocksPerMultiprocessor) \
  X(cuFuncGetAttribute)          \
  X(cuMemAlloc)                  \
  X(cuMemGetInfo)                \
  X(cuMemFree)                   \
  X(cuMemcpyHtoD)                \
  X(cuMemcpyDtoH)                \
  X(cuMemsetD8)                  \
  X(cuMemsetD8Async)             \
  X(cuMemcpyAsync)               \
  X(cuMemAllocAsync)             \
  X(cuMemFreeAsync)              \
  X(cuStreamCreate)              \
  X(cuStreamDestroy)             \
  X(cuStreamSynchronize)

struct Driver {
#define KILN_DRIVER_MEMBER(fn) decltype(&::fn) fn = nullptr;
  KILN_DRIVER_FUNCTIONS(KILN_DRIVER_MEMBER)
#undef KILN_DRIVER_MEMBER
};

// The process-wide driver table: dlopen("libcuda.so.1") and cuInit(0) on first call.
// Throws Error(no_driver) when the library is missing and Error(no_device) when cuInit finds no GPU;
// the message says what to do. Later calls after a failure throw the same error without retrying.
const Driver& driver();

// True when driver() would succeed. Never throws; initialises CUDA only if the library is present.
bool driver_available() noexcept;

// Throws Error(driver) naming `what` (the call and its subject) and the driver's own error text.
void check(CUresult result, std::string_view what);

}  // namespace kiln
