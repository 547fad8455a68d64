// The registry: hands out launchable kernels from the fastest tier that has them.
#pragma once

#include <kiln/config.hpp>  // C++20, checked first

#include <kiln/error.hpp>

#include <cuda.h>  // the handles a Kernel holds and launch takes

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace kiln {

// Named here, defined where they are used: what a consumer of kiln.hpp does not compile.
struct Catalog;      // kiln/catalog.hpp
struct CacheKey;     // kiln/cache.hpp, for Registry::cache_key
class DiskCache;     // kiln/cache.hpp
class RemoteCache;   // kiln/remote.hpp

namespace detail {
struct UnitQuery;  // chain/tier.hpp: what the tier chain is asked
class Prefetch;  // registry/prefetch.hpp: this device's images unpacked ahead
}  // namespace detail

// In the order get() asks them.
enum class Tier : std::uint8_t { memory, embedded, disk, remote, ptx, jit };

std::string_view to_string(Tier tier) noexcept;

// Where a unit's binary comes from: what a LoadPlan foresees and a Provenance reports.
struct Origin {
  Tier source = Tier::embedded;  // the tier the binary came from
  unsigned arch = 0;             // architecture of the binary's code (90 = sm_90 or compute_90)
  bool ptx = false;              // assembled by kiln's PTX tier from embedded PTX
};

struct Provenance : Origin {
  Tier tier = Tier::memory;    // the tier that served this call: memory for every get() after the first
  double load_ms = 0;          // wall time of the get() that made the kernel launchable
  std::string_view cache_key;  // disk, remote and JIT tiers: the entry's key (hex); empty otherwise
};

struct Kernel {
  std::string_view name;
  std::string_view lowered_name;
  CUkernel kernel = nullptr;      // context-independent handle (cuLibraryGetKernel)
  // The same kernel in the registry's device's primary context, as that context was when get() returned:
  // a reset of the context (cudaDeviceReset, cuDevicePrimaryCtxReset) invalidates it, and the next get()
  // hands out a new one. Kernel values kept across a reset should launch through launch_handle().
  CUfunction function = nullptr;
  // The registry's device's primary context: kiln::launch makes it current on a thread that has none.
  CUcontext context = nullptr;
  Provenance provenance{};
  // What keeps its module loaded where the kernel may outlive what made it: a program's kernel holds its
  // program's registry (kiln/program.hpp), so that dropping the program, or kiln::program() forgetting it,
  // unloads nothing a kept Kernel launches through. Empty for a Registry's kernel, which lives as long as
  // its registry.
  std::shared_ptr<const void> keeps_loaded;

  // What cuLaunchKernel and cuOccupancy* accept in any context: the CUkernel, cast as the driver allows
  // since CUDA 12.0. It launches in the current context and stays valid across context resets; kiln's
  // own launches (kiln::launch, the primitives) use it. (cuFuncGetAttribute does not take it: use
  // cuKernelGetAttribute.)
  CUfunction launch_handle() const noexcept { return reinterpret_cast<CUfunction>(kernel); }
};

struct RegistryOptions {
  // The PTX tier: when no cubin fits the device and none is on disk, assemble the embedded PTX the
  // device can run (nvJitLink in kiln's worker pool, ~10x cheaper than compiling the source) and publish
  // the cubin to the disk cache. kiln never hands PTX to the driver's own JIT.
  bool allow_ptx = true;
  // Serve the cubins embedded in the binary. Off makes every kernel come from the disk, PTX or JIT tier,
  // as on a GPU the binary was not built for: for testing such a deployment on a machine that has one
  // (with allow_ptx off too, every kernel comes from disk or the JIT).
  bool use_embedded = true;
  // The disk tier: nullptr means the process-wide default_cache() (configured from KILN_CACHE*),
  // touched only when no embedded cubin fits the device.
  DiskCache* cache = nullptr;
  // The JIT tier: compile with NVRTC + nvJitLink (in worker processes) what no other tier has, and
  // publish it to the disk cache (and the remote cache, once fleet-wide).
  bool use_jit = true;
  // The remote tier, a cache a fleet shares (kiln/remote.hpp): asked after the disk cache, before the JIT.
  // nullptr means the process-wide default_remote() (configured from KILN_REMOTE_CACHE; off when unset).
  RemoteCache* remote = nullptr;
  bool use_remote = true;
};

// What the warm-up machinery has done (Registry::status()).
struct WarmupStatus {
  std::size_t submitted = 0;  // names queued for background compilation
  std::size_t compiled = 0;   // of those, now loaded from the JIT tier (or from disk, built by another process)
  std::size_t deferred = 0;   // asked for, but embedded or on disk already: loaded on first get()
  std::size_t pending = 0;    // queued or compiling
  std::size_t failed = 0;
  struct PerKernel {
    std::string name;
    std::string state;  // "loaded", "deferred", "pending", "failed"
    Tier tier = Tier::memory;  // where a loaded kernel came from
    double ms = 0;             // the get() that loaded it (compile included)
    Reason error;              // for failed: as get() threw it
  };
  std::vector<PerKernel> kernels;  // every kernel asked for or loaded
};

// Where get() would take a kernel from, without loading anything (Registry::plan). `tier` is the tier that
// would serve it, as Provenance::tier says after get(): memory when it is loaded already, else embedded,
// disk, remote, ptx or jit; `source`, `arch` and `ptx` are its binary's, as Provenance has them.
struct LoadPlan : Origin {
  Tier tier = Tier::memory;
  bool available = false;
  // Why it is not available, as get() would throw it: no_binary (no tier has it; a linked unit's kernel
  // without its operator), no_driver, no_device, driver. Empty when available.
  Reason reason;
};
using Plan [[deprecated("kiln::Plan is now kiln::LoadPlan")]] = LoadPlan;

struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  unsigned arch = 0;   // 90 for compute capability 9.0: the architecture whose binaries this device takes
  int driver_version = 0;  // e.g. 13000
  std::size_t total_memory = 0;
  unsigned gpu_arch = 0;  // the GPU's own; differs from arch where KILN_DEVICE_ARCH overrides it
};

struct RegistryStats {
  std::uint64_t unit_loads = 0;    // units made loaded: a library loaded, or shared with another device's registry
  std::uint64_t kernel_loads = 0;  // kernels made launchable
  std::uint64_t disk_loads = 0;    // units served by the disk tier
  std::uint64_t remote_loads = 0;  // units served by the remote tier
  std::uint64_t jit_compiles = 0;  // units this registry compiled
  std::uint64_t context_reloads = 0;  // kernels made launchable again after their context was reset
};

// The libraries of the whole process (one per binary image, shared by the registries of every device that
// selects the image: docs/DESIGN.md, "Several GPUs").
struct LibraryStats {
  std::uint64_t loads = 0;   // cuLibraryLoadData calls, one per distinct image
  std::uint64_t shared = 0;  // units a registry took from a library another registry had loaded
  std::uint64_t live = 0;    // libraries loaded now
};
LibraryStats library_stats() noexcept;

// Code given at run time that a unit's kernels call and do not define (an operator: kiln/prim/operator.hpp).
// kiln compiles it with NVRTC and links it into the unit with nvJitLink, LTO (docs/DESIGN.md, "Operators
// at run time").
struct LinkedSource {
  std::string name;    // for messages, e.g. "operator 'op' of kiln::prim::ReduceWith<float>"
  std::string source;  // CUDA C++; it may include the unit's headers. The disk cache keys on its bytes.
  // `source` holds LTO-IR instead (NVRTC -dlto, nvrtcGetLTOIR, for this device's compute arch), linked as it
  // is: what the unit calls must be defined in it. Another key from the same bytes as text.
  bool lto_ir = false;
};

// A kernel named at compile time: the generated catalog header declares one per kernel of the table
// (`my::kernels::saxpy`, docs/tiers.md, "The registry"), so a misspelt name does not compile. Sig is the
// kernel's type, void(Params...), when the generator could name every parameter's type on the host
// (built-in types and pointers to them); else void, and launch takes arguments as they are.
template <typename Sig>
struct KernelRef {
  const Catalog& (*catalog)();  // the registry it belongs to
  std::string_view name;
};

template <typename Sig>
class TypedKernel;

// One registry per (catalog, device). Thread-safe. Construction does not touch CUDA; the first
// get() (or device()) initialises the driver and retains the device's primary context.
//
// A reset of that context (cudaDeviceReset, cuDevicePrimaryCtxReset) is survived: the loaded libraries
// are context-independent and stay; get() notices the context is a new one (cuCtxGetId) and resolves
// the kernel's CUfunction in it again (stats().context_reloads), and get() or context() bring a reset
// context that nobody has used since back to life, as the runtime would.
class Registry {
 public:
  explicit Registry(const Catalog& catalog, int device = 0, RegistryOptions options = {});
  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // A launchable kernel. The second and later calls for a name are a lock-free read (and one
  // cuCtxGetId, ~16 ns, to see that the context was not reset). Concurrent first calls load it once.
  // Throws kiln::Error: unknown_kernel; no_driver, no_device, driver; no_binary (no tier has it: what each
  // said); compile (the unit, options and log, a compile that could not be started included); cache,
  // catalog, no_compiler where those fail it.
  Kernel get(std::string_view name);
  // The same, for a kernel named by its handle: a TypedKernel, whose launch takes the kernel's parameter
  // types. Throws unknown_kernel for another registry's handle.
  template <typename Sig>
  TypedKernel<Sig> get(const KernelRef<Sig>& ref) {
    check_belongs(ref.catalog(), ref.name);
    return TypedKernel<Sig>(get(ref.name));
  }

  // A kernel of a unit whose kernels call a function `link` defines (a jit_only row whose operator is
  // kiln_prim::linked_binary_op<T>, say), with link.source linked in: from memory when this registry
  // linked the unit with the same text before, else from the disk cache (keyed by the unit and the text),
  // else compiled by the JIT tier's workers (the unit and link.source to LTO-IR, nvJitLink -lto) and
  // published there. Throws kiln::Error: compile (NVRTC's log and link.source) when it does not build,
  // no_binary when the JIT tier is off and no cache has it, unknown_kernel, invalid_argument (link given
  // as LTO-IR where it cannot be), and get()'s others.
  Kernel get(std::string_view name, const LinkedSource& link);

  // Throws kiln::Error(unknown_kernel) only: what would fail get() is the plan's reason.
  LoadPlan plan(std::string_view name);
  DeviceInfo device();
  CUcontext context();
  RegistryStats stats() const noexcept;
  const Catalog& catalog() const noexcept;

  // The disk-cache key of a kernel's unit for this device (or `arch`, when given): what the disk tier
  // looks up and what a compiler publishes under. Initialises the device when arch is 0.
  CacheKey cache_key(std::string_view name, unsigned arch = 0);

  // Warm-up (JIT tier). request_warmup returns at once: names already embedded or on disk are
  // deferred (loaded on first get(), no compile pool started), the others are compiled in the
  // background. ensure_warm blocks up to `timeout` and returns the names still not ready.
  // Without a CUDA driver these cost nothing and never initialise CUDA; KILN_PRECOMPILE=0 turns
  // background work off (ensure_warm then compiles nothing either). Both throw kiln::Error for a name the
  // registry lacks (unknown_kernel) or a linked unit's (no_binary); what fails in the background (a
  // compile, no thread to be had) is a failed kernel in status(), never an exception.
  void request_warmup(const std::vector<std::string>& names);
  std::vector<std::string> ensure_warm(const std::vector<std::string>& names, std::chrono::milliseconds timeout);
  void precompile_all();
  WarmupStatus status();

 private:
  class Impl;  // runtime/src/registry/registry_impl.hpp
  friend class Program;  // a program's registry: its chain compiles the program's own unit source
  explicit Registry(std::unique_ptr<Impl> impl);
  void check_belongs(const Catalog& catalog, std::string_view name) const;
  std::unique_ptr<Impl> impl_;
};

// Launch `kernel` in the current context; a thread with no current context gets the kernel's registry's
// (its device's primary context, as the CUDA runtime would make current). `args` points at each argument,
// as cuLaunchKernel wants.
struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};
void launch(const Kernel& kernel, Dim3 grid, Dim3 block, unsigned shared_bytes, CUstream stream, void** args);

// The device (ordinal) a context belongs to; -1 when it cannot be told (a destroyed context, no driver).
int context_device(CUcontext context) noexcept;
// The device whose work `stream` queues: its context's; for a null stream (or CU_STREAM_LEGACY,
// CU_STREAM_PER_THREAD), the current context's. -1 when it cannot be told (no current context).
int stream_device(CUstream stream) noexcept;

// The arguments as values, of the types the kernel declares: the caller's job with a Kernel (pass 2.0f to
// a float, not 2.0); a TypedKernel's launch checks them.
template <typename... Args>
void launch(const Kernel& kernel, Dim3 grid, Dim3 block, unsigned shared_bytes, CUstream stream, const Args&... args) {
  // cuLaunchKernel takes void** but only reads through it: const arguments are fine.
  void* pointers[] = {const_cast<void*>(static_cast<const void*>(&args))..., nullptr};
  launch(kernel, grid, block, shared_bytes, stream, pointers);
}

namespace detail {
// An argument for a parameter of type P: one P can be brace-initialised from (no narrowing conversion:
// not a double for a float, not a std::size_t for an int), or a CUdeviceptr for a pointer.
template <typename P, typename A>
concept kernel_argument_for = (std::is_pointer_v<P> && std::is_same_v<std::remove_cvref_t<A>, CUdeviceptr>) ||
                              requires(A&& a) { P{std::forward<A>(a)}; };

template <typename P, typename A>
P kernel_argument(A&& a) {
  if constexpr (std::is_pointer_v<P> && std::is_same_v<std::remove_cvref_t<A>, CUdeviceptr>)
    return reinterpret_cast<P>(static_cast<std::uintptr_t>(a));
  else
    return P{std::forward<A>(a)};
}
}  // namespace detail

// A kernel whose parameters the generator knew: launch takes exactly as many arguments, each converted
// to its parameter's type without narrowing.
template <typename... Params>
class TypedKernel<void(Params...)> : public Kernel {
 public:
  explicit TypedKernel(const Kernel& kernel) : Kernel(kernel) {}

  template <typename... Args>
    requires(sizeof...(Args) == sizeof...(Params)) && (detail::kernel_argument_for<Params, Args> && ...)
  void launch(Dim3 grid, Dim3 block, unsigned shared_bytes, CUstream stream, Args&&... args) const {
    launch_values(grid, block, shared_bytes, stream, detail::kernel_argument<Params>(std::forward<Args>(args))...);
  }

 private:
  void launch_values(Dim3 grid, Dim3 block, unsigned shared_bytes, CUstream stream, Params... values) const {
    void* pointers[] = {static_cast<void*>(&values)..., nullptr};
    kiln::launch(*this, grid, block, shared_bytes, stream, pointers);
  }
};

// A kernel whose parameter types the generator could not name on the host (a type of the project's, a
// CUB type): launch passes the arguments as they are, as kiln::launch does.
template <>
class TypedKernel<void> : public Kernel {
 public:
  explicit TypedKernel(const Kernel& kernel) : Kernel(kernel) {}

  template <typename... Args>
  void launch(Dim3 grid, Dim3 block, unsigned shared_bytes, CUstream stream, const Args&... args) const {
    kiln::launch(*this, grid, block, shared_bytes, stream, args...);
  }
};

}  // namespace kiln
