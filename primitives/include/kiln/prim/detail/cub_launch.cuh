// Runs CUB's own host dispatch on kernels from any kiln registry (nvcc only; header-only, so that a
// project's own .cu files can run kiln's plan templates on its registry without libkiln_prim).
//
// CUB's Dispatch* structs take a KernelSource (where the kernels come from), a launcher factory (how they
// are launched and how the device is queried) and a policy hub object (which tuning policy fits the
// device). kiln supplies all three:
//  - KernelRef: a kernel the registry loaded, launched through kiln's dlopen'ed driver table;
//  - LauncherFactory: CUB 3.0.1's CudaDriverLauncherFactory drops launch errors and links libcuda; this
//    one records the first failure, which every plan turns into a kiln::Error after the dispatch;
//  - RuntimePolicy: ChainedPolicy::Invoke in a host TU compiled by nvcc only dispatches over that TU's own
//    -arch list; this walks the same chain by the architecture of the binary the registry loaded, with the
//    rule the device side uses for ActivePolicy (the newest policy not newer than the binary's arch), on
//    the same policy types: host and device numbers cannot differ.
#pragma once

#include <kiln/driver.hpp>
#include <kiln/error.hpp>
#include <kiln/registry.hpp>

#include <cub/util_device.cuh>

#include <string>
#include <string_view>
#include <type_traits>

namespace kiln::prim::detail {

// A registry kernel as CUB's dispatch passes it around: its context-independent handle, so that a plan
// keeps working in whatever context is current, and across a reset of the device's primary context.
struct KernelRef {
  CUfunction function = nullptr;  // Kernel::launch_handle()
  std::string_view name;
};

inline KernelRef ref(const Kernel& kernel) { return {kernel.launch_handle(), kernel.name}; }

// Empty when `stream` queues work on the current context's device, which is the plan's (every plan call
// makes its registry's context current); else why the plan refuses it. One pointer compare in the common
// case; the driver is asked which devices the two contexts are only when they differ.
inline std::string stream_refusal(CUstream stream) {
  if (stream == nullptr || stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD) return {};
  const Driver& cu = kiln::driver();
  CUcontext of_stream = nullptr, current = nullptr;
  if (cu.cuStreamGetCtx(stream, &of_stream) != CUDA_SUCCESS || of_stream == nullptr) return {};  // the launch says why
  if (cu.cuCtxGetCurrent(&current) != CUDA_SUCCESS || current == of_stream) return {};
  const int plan = kiln::context_device(current), other = kiln::context_device(of_stream);
  if (plan < 0 || other < 0 || plan == other) return {};
  return "the plan's kernels are device " + std::to_string(plan) + "'s (its registry's) and the stream is device " +
         std::to_string(other) + "'s: make the plan on device " + std::to_string(other) +
         "'s registry (kiln::prim::registry(" + std::to_string(other) +
         ")), whose binary is for that device's architecture";
}

// The first launch or query failure of one plan call.
struct LaunchStatus {
  CUresult result = CUDA_SUCCESS;
  std::string_view kernel;
  const char* what = "";
  bool stream_checked = false;  // the call's stream is checked once, before its first launch
  std::string refused;          // why the stream was refused (stream_refusal): nothing was launched

  void record(CUresult r, std::string_view name, const char* call) {
    if (r != CUDA_SUCCESS && result == CUDA_SUCCESS) {
      result = r;
      kernel = name;
      what = call;
    }
  }
};

class Launcher {
 public:
  Launcher(dim3 grid, dim3 block, std::size_t shared_bytes, CUstream stream, bool dependent, LaunchStatus* status)
      : grid_(grid), block_(block), shared_(shared_bytes), stream_(stream), dependent_(dependent), status_(status) {}

  template <typename... Args>
  cudaError_t doit(KernelRef kernel, const Args&... args) const {
    if (!status_->stream_checked) {
      status_->stream_checked = true;
      status_->refused = stream_refusal(stream_);
    }
    if (!status_->refused.empty()) return cudaErrorInvalidResourceHandle;  // CUB stops; check_dispatch throws
    void* argv[] = {const_cast<void*>(static_cast<const void*>(&args))..., nullptr};
    CUresult r;
    if (dependent_) {
      // Programmatic dependent launch, as CUB's own launchers do where the kernel waits on its predecessor.
      CUlaunchAttribute attribute{};
      attribute.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
      attribute.value.programmaticStreamSerializationAllowed = 1;
      CUlaunchConfig config{};
      config.gridDimX = grid_.x, config.gridDimY = grid_.y, config.gridDimZ = grid_.z;
      config.blockDimX = block_.x, config.blockDimY = block_.y, config.blockDimZ = block_.z;
      config.sharedMemBytes = static_cast<unsigned>(shared_);
      config.hStream = stream_;
      config.attrs = &attribute;
      config.numAttrs = 1;
      r = kiln::driver().cuLaunchKernelEx(&config, kernel.function, argv, nullptr);
    } else {
      r = kiln::driver().cuLaunchKernel(kernel.function, grid_.x, grid_.y, grid_.z, block_.x, block_.y, block_.z,
                                        static_cast<unsigned>(shared_), stream_, argv, nullptr);
    }
    status_->record(r, kernel.name, "cuLaunchKernel");
    return static_cast<cudaError_t>(r);
  }

 private:
  dim3 grid_, block_;
  std::size_t shared_;
  CUstream stream_;
  bool dependent_;
  LaunchStatus* status_;
};

class LauncherFactory {
 public:
  // `arch`: the architecture of the binary the kernels came from (Provenance::arch, 90 for sm_90).
  LauncherFactory(CUdevice device, unsigned arch, LaunchStatus* status)
      : device_(device), ptx_version_(static_cast<int>(arch) * 10), status_(status) {}

  Launcher operator()(dim3 grid, dim3 block, std::size_t shared_bytes, CUstream stream,
                      bool dependent_launch = false) const {
    return Launcher(grid, block, shared_bytes, stream, dependent_launch, status_);
  }

  cudaError_t PtxVersion(int& version) const {
    version = ptx_version_;
    return cudaSuccess;
  }

  cudaError_t MultiProcessorCount(int& count) const {
    return attribute(count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "cuDeviceGetAttribute(MULTIPROCESSOR_COUNT)");
  }

  cudaError_t MaxGridDimX(int& max_x) const {
    return attribute(max_x, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, "cuDeviceGetAttribute(MAX_GRID_DIM_X)");
  }

  cudaError_t MaxSmOccupancy(int& occupancy, KernelRef kernel, int block_threads, int dynamic_shared = 0) const {
    CUresult r = kiln::driver().cuOccupancyMaxActiveBlocksPerMultiprocessor(&occupancy, kernel.function,
                                                                           block_threads, dynamic_shared);
    status_->record(r, kernel.name, "cuOccupancyMaxActiveBlocksPerMultiprocessor");
    return static_cast<cudaError_t>(r);
  }

 private:
  cudaError_t attribute(int& value, CUdevice_attribute which, const char* what) const {
    CUresult r = kiln::driver().cuDeviceGetAttribute(&value, which, device_);
    status_->record(r, {}, what);
    return static_cast<cudaError_t>(r);
  }

  CUdevice device_;
  int ptx_version_;
  LaunchStatus* status_;
};

// The link of a CUB ChainedPolicy: its architecture and the policy before it (itself at the chain's end).
template <int Arch, typename Policy, typename Prev>
struct ChainLink {
  static constexpr int arch = Arch;
  using prev = Prev;
};
template <int Arch, typename Policy, typename Prev>
ChainLink<Arch, Policy, Prev> chain_link(const cub::ChainedPolicy<Arch, Policy, Prev>*);

template <typename Policy>
struct RuntimePolicy {
  template <typename Op>
  static cudaError_t Invoke(int ptx_version, Op& op) {
    using Link = decltype(chain_link(static_cast<const Policy*>(nullptr)));
    if constexpr (!std::is_same_v<typename Link::prev, Policy>) {
      if (ptx_version < Link::arch) return RuntimePolicy<typename Link::prev>::Invoke(ptx_version, op);
    }
    return op.template Invoke<Policy>();
  }
};

// Turns the outcome of one CUB dispatch into kiln's error model: a launch or query the driver refused, or
// an error CUB itself returned, becomes kiln::Error(driver) naming the primitive and the kernel; a stream
// of another device, kiln::Error(invalid_argument).
inline void check_dispatch(cudaError_t returned, const LaunchStatus& status, std::string_view primitive) {
  if (!status.refused.empty())
    throw kiln::Error(Errc::invalid_argument, "kiln::prim::" + std::string(primitive) + ": " + status.refused);
  if (status.result != CUDA_SUCCESS) {
    const char* name = nullptr;
    const char* text = nullptr;
    kiln::driver().cuGetErrorName(status.result, &name);
    kiln::driver().cuGetErrorString(status.result, &text);
    std::string message = "kiln::prim::" + std::string(primitive) + ": " + status.what;
    if (!status.kernel.empty()) message += " of kernel '" + std::string(status.kernel) + "'";
    message += " failed: " + std::string(name ? name : "?") + " (" + (text ? text : "unknown error") + ")";
    throw kiln::Error(Errc::driver, message);
  }
  if (returned != cudaSuccess) {
    throw kiln::Error(Errc::driver, "kiln::prim::" + std::string(primitive) + ": CUB's dispatch failed: " +
                                        cudaGetErrorName(returned) + " (" + cudaGetErrorString(returned) + ")");
  }
}

}  // namespace kiln::prim::detail
