// The registry: lock-free hits on loaded kernels, lazy per-unit loading of binaries.
#include <kiln/error.hpp>
#include <kiln/registry.hpp>
#include <kiln/select.hpp>

#include "chain/tier_chain.hpp"
#include "base/parse.hpp"  // forced_arch
#include "registry/libraries.hpp"
#include "registry/linked_units.hpp"
#include "registry/name_index.hpp"
#include "registry/prefetch.hpp"
#include "registry/query.hpp"  // make_chain
#include "registry/registry_impl.hpp"
#include "registry/warmup.hpp"
#include "registry/demand_record.hpp"  // record_kernel

#include <chrono>
#include <string>

namespace kiln {

namespace {

Kernel memory_hit(const Kernel& loaded) noexcept {
  Kernel hit = loaded;
  hit.provenance.tier = Tier::memory;
  return hit;
}

// Throws Error(driver) for a failed load step, naming the kernel, its unit and the binary; builds text only on failure.
void check_load(CUresult result, std::string_view call, const Catalog& catalog, const KernelEntry& kernel,
                std::string_view binary) {
  if (result == CUDA_SUCCESS) return;
  check(result, "kiln: " + std::string(call) + " for kernel '" + std::string(catalog.str(kernel.name)) +
                    "' (unit '" + std::string(catalog.str(catalog.units[kernel.unit].name)) + "', " +
                    std::string(binary) + ")");
}

// Makes `context` current for a scope; the pop runs even when the work in between throws.
class ContextScope {
 public:
  ContextScope(const Driver& cu, CUcontext context) : cu_(cu) {
    check(cu_.cuCtxPushCurrent(context), "kiln: cuCtxPushCurrent of the primary context");
  }
  ~ContextScope() {
    CUcontext popped = nullptr;
    cu_.cuCtxPopCurrent(&popped);
  }
  ContextScope(const ContextScope&) = delete;
  ContextScope& operator=(const ContextScope&) = delete;

 private:
  const Driver& cu_;
};

}  // namespace

std::string_view to_string(Tier tier) noexcept {
  switch (tier) {
    case Tier::memory: return "memory";
    case Tier::embedded: return "embedded";
    case Tier::disk: return "disk";
    case Tier::remote: return "remote";
    case Tier::jit: return "jit";
    case Tier::ptx: return "ptx";
  }
  return "unknown";
}

Registry::Impl::Impl(const Catalog& catalog, int device, RegistryOptions options,
                     std::shared_ptr<const detail::UnitSource> given)
    : catalog_(catalog),
      names_(detail::build_name_index(catalog)),
      ordinal_(device),
      options_(options),
      chain_(detail::make_chain(catalog, options_, std::move(given))),
      units_(std::make_unique<UnitState[]>(catalog.units.size())),
      slots_(std::make_unique<Slot[]>(catalog.kernels.size())),
      linked_(std::make_unique<LinkedUnits>()) {}

Registry::Impl::~Impl() {
  warmup_.reset();  // joins the background threads before anything they use goes away
  prefetch_.reset();
  for (std::size_t i = 0; i < catalog_.kernels.size(); ++i) delete slots_[i].loaded.load(std::memory_order_relaxed);
  if (!context_) return;  // CUDA was never initialised by this registry: nothing to release
  // Errors are ignored: at process exit the driver may already be shutting down.
  const Driver& cu = driver();
  for (std::size_t i = 0; i < catalog_.units.size(); ++i)
    for (CUlibrary library : units_[i].libraries) detail::release_library(library);
  for (const auto& [key, unit] : linked_->units) detail::release_library(unit->library);
  cu.cuDevicePrimaryCtxRelease(cu_device_);
}

const KernelEntry* Registry::Impl::find(std::string_view name) const noexcept {
  return detail::find_by_name(catalog_, names_, name);
}

Kernel Registry::Impl::ready(std::string_view name) {
  const KernelEntry* entry = find(name);
  if (!entry) throw Error(Errc::unknown_kernel, unknown_kernel_message(catalog_, name));
  const std::size_t index = static_cast<std::size_t>(entry - catalog_.kernels.data());
  if (const Loaded* loaded = slots_[index].loaded.load(std::memory_order_acquire)) {
    // Loaded means the driver is up. A failed query (a reset, destroyed context) leaves id 0: reload.
    unsigned long long id = 0;
    driver().cuCtxGetId(context_, &id);
    if (id == loaded->context_id) return memory_hit(loaded->kernel);
  }
  if (catalog_.units[entry->unit].linked) throw Error(Errc::no_binary, linked_unit_message(catalog_, *entry));
  return load(*entry, index);
}

Kernel Registry::Impl::get(std::string_view name) {
  Kernel k = ready(name);
  k.keeps_loaded = owner_.lock();
  return k;
}

// The primary context's id (cuCtxGetId: unique per context the driver ever made). A reset destroys the
// context but keeps the handle and this registry's retain on it; until someone uses it again it is dead
// (CUDA_ERROR_CONTEXT_IS_DESTROYED), and retaining it makes a new context behind the same handle, with a
// new id (measured on an H100 with CUDA 13.0: docs/facts.md, "Several GPUs").
std::uint64_t Registry::Impl::live_context_id() {
  const Driver& cu = driver();
  unsigned long long id = 0;
  CUresult result = cu.cuCtxGetId(context_, &id);
  if (result == CUDA_SUCCESS) return id;  // the usual case: nothing allocated (plans call this per call)
  const std::string subject = " of the primary context of device " + std::to_string(ordinal_);
  if (result == CUDA_ERROR_CONTEXT_IS_DESTROYED) {
    // Retain and release: the context lives again, and this registry's own retain (kept through the
    // reset) is the count it had before.
    CUcontext again = nullptr;
    check(cu.cuDevicePrimaryCtxRetain(&again, cu_device_), "kiln: cuDevicePrimaryCtxRetain after a reset" + subject);
    cu.cuDevicePrimaryCtxRelease(cu_device_);
    if (again != context_) {
      throw Error(Errc::driver, "kiln: the primary context of device " + std::to_string(ordinal_) +
                                    " was reset and the driver made it anew under another handle; this registry "
                                    "cannot follow it: make a new kiln::Registry after a device reset");
    }
    result = cu.cuCtxGetId(context_, &id);
  }
  check(result, "kiln: cuCtxGetId" + subject);
  return id;
}

Kernel Registry::Impl::load(const KernelEntry& entry, std::size_t index) {
  const auto start = std::chrono::steady_clock::now();
  ensure_device();
  const Driver& cu = driver();
  const std::uint64_t context_id = live_context_id();
  UnitState& unit = units_[entry.unit];
  std::lock_guard lock(unit.mutex);
  // Another thread may have loaded the kernel while this one waited for the lock.
  const Loaded* before = slots_[index].loaded.load(std::memory_order_acquire);
  if (before && before->context_id == context_id) return memory_hit(before->kernel);
  // Not loaded, or loaded in a context that was reset since. The unit's library is context-independent
  // and outlives a reset: only the CUfunction is resolved again.
  if (unit.libraries.empty()) load_unit(unit, entry);

  // StrRef is not NUL-terminated; the driver wants a C string.
  const std::string_view lowered_name = lowered_in(unit, entry);
  const std::string lowered(lowered_name);
  CUkernel kernel = nullptr;
  check_load(cu.cuLibraryGetKernel(&kernel, library_of(unit, entry), lowered.c_str()), "cuLibraryGetKernel", catalog_, entry,
             unit.image.label);
  // Resolving the function now loads the module into the context, so the first launch has no hidden cost.
  CUfunction function = nullptr;
  {
    ContextScope current(cu, context_);
    check_load(cu.cuKernelGetFunction(&function, kernel), "cuKernelGetFunction", catalog_, entry, unit.image.label);
  }

  const double load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  const Loaded* published = new Loaded{
      Kernel{
          catalog_.str(entry.name),
          lowered_name,
          kernel,
          function,
          context_,
          Provenance{unit.image, unit.image.source, load_ms, unit.image.cache_key},
          {},  // keeps_loaded: set on each copy get() hands out
      },
      context_id,
  };
  slots_[index].loaded.store(published, std::memory_order_release);
  if (before) {
    // Other threads may still be reading the old one: it stays until the registry ends.
    std::lock_guard retire(retired_mutex_);
    retired_.emplace_back(before);
    context_reloads_.fetch_add(1, std::memory_order_relaxed);
  } else {
    kernel_loads_.fetch_add(1, std::memory_order_relaxed);
  }
  return published->kernel;
}

// The unit's binary from the first tier of the chain that has one, loaded. Called with the unit's
// mutex held, so threads of this process ask the tiers once per unit (and the JIT compiles it once).
void Registry::Impl::load_unit(UnitState& unit, const KernelEntry& entry) {
  detail::UnitQuery q = query(entry);
  if (auto ready = prefetch_ ? prefetch_->take(entry.unit) : std::nullopt) {
    unit.image = std::move(*ready);  // what the embedded or the disk tier, first in the chain to have it, read ahead
    chain_.served(q, unit.image);
  } else {
    unit.image = chain_.fetch(q);
  }
  const auto what = [&] {
    return "kernel '" + std::string(catalog_.str(entry.name)) + "' (unit '" +
           std::string(catalog_.str(catalog_.units[entry.unit].name)) + "', " + unit.image.label;
  };
  if (unit.image.packed && !load_packed(unit, entry, what() + ")")) {
    // The driver refused the cubin packed: unpacked here instead, where damage is found and said (and the
    // next tier serves), else loaded as any other image.
    q.unpack = true;
    unit.image = chain_.fetch(q);
  }
  count_served(unit.image);
  // A table's kernel that nothing embedded served goes into the demand record, if one is kept (a unit
  // source given at run time is recorded by its program instead: kiln/program.hpp).
  if (unit.image.tier != Tier::embedded && chain_.given() == nullptr)
    detail::record_kernel(catalog_.name, catalog_.str(entry.name), info_.arch);
  const std::string identity = image_identity(unit.image, entry.unit);
  const auto& parts = unit.image.parts;
  try {
    if (parts.empty() && unit.libraries.empty())
      unit.libraries.push_back(detail::acquire_library(identity, unit.image.owned, what() + ")"));
    // A unit compiled in parts: a library per part, none shared with another (docs/DESIGN.md, "A unit's
    // kernels over several workers").
    for (std::size_t p = 0; p < parts.size(); ++p) {
      const std::string part = std::to_string(p);
      unit.libraries.push_back(
          detail::acquire_library(identity + ":part" + part, parts[p].cubin, what() + ", part " + part + ")"));
    }
  } catch (...) {
    for (CUlibrary library : unit.libraries) detail::release_library(library);
    unit.libraries.clear();
    throw;
  }
  unit_loads_.fetch_add(1, std::memory_order_relaxed);
}

bool Registry::Impl::load_packed(UnitState& unit, const KernelEntry& entry, const std::string& what) {
  CUlibrary library = nullptr;
  try {
    library = detail::acquire_library(image_identity(unit.image, entry.unit), unit.image.owned, what);
  } catch (const Error&) {
    return false;
  }
  // The kernel's symbol read from the library: the image unpacked and parsed, whenever the driver does it.
  CUkernel kernel = nullptr;
  const std::string lowered(lowered_in(unit, entry));
  if (driver().cuLibraryGetKernel(&kernel, library, lowered.c_str()) != CUDA_SUCCESS) {
    detail::release_library(library);
    return false;
  }
  unit.libraries.push_back(library);
  return true;
}

CUlibrary Registry::Impl::library_of(const UnitState& unit, const KernelEntry& entry) const {
  const auto& parts = unit.image.parts;
  if (parts.empty()) return unit.libraries.front();
  const std::string_view name = catalog_.str(entry.name);
  for (std::size_t p = 0; p < parts.size(); ++p)
    for (const std::uint32_t k : parts[p].kernels)
      if (unit.image.kernels[k].name == name) return unit.libraries[p];
  // The tiers hand over only entries that serve the unit (entry_serves_unit) and whose every kernel is in
  // a part (check_entry): not reached.
  throw Error(Errc::cache, "kiln: no part of " + unit.image.label + " holds kernel '" + std::string(name) + "'");
}

std::string Registry::Impl::image_identity(const detail::UnitImage& image, std::uint32_t unit) const {
  // An embedded image is its catalog's, unit's and architecture's; any other is its cache entry's.
  if (image.source == Tier::embedded) {
    // Packed or not (UnitImage::packed): the same cubin once the driver has it, so one library.
    return "embedded:" + std::to_string(reinterpret_cast<std::uintptr_t>(&catalog_)) + ":" + std::to_string(unit) +
           ":" + std::to_string(image.arch);
  }
  if (!image.cache_key.empty()) return "entry:" + image.cache_key;
  return "registry:" + std::to_string(reinterpret_cast<std::uintptr_t>(this)) + ":" + std::to_string(unit);
}

std::string_view Registry::Impl::lowered_in(const UnitState& unit, const KernelEntry& entry) const {
  // The image's own record where it has one (a cache entry's, a compile's: the names NVRTC gave, which a
  // unit source given at run time learns only so); an embedded image's are the catalog's.
  for (const CachedKernel& k : unit.image.kernels)
    if (k.name == catalog_.str(entry.name) && !k.lowered.empty()) return k.lowered;
  return catalog_.str(entry.lowered);
}

detail::UnitQuery Registry::Impl::query(const KernelEntry& entry, const LinkedSource* link) {
  return chain_.query(entry, info_.arch, link);
}

void Registry::Impl::count_served(const detail::UnitImage& image) {
  if (image.tier == Tier::disk) disk_loads_.fetch_add(1, std::memory_order_relaxed);
  if (image.tier == Tier::remote) remote_loads_.fetch_add(1, std::memory_order_relaxed);
  if (image.tier == Tier::jit && image.source == Tier::jit) jit_compiles_.fetch_add(1, std::memory_order_relaxed);
}

CacheKey Registry::Impl::cache_key(std::string_view name, unsigned arch) {
  const KernelEntry* entry = find(name);
  if (!entry) throw Error(Errc::unknown_kernel, unknown_kernel_message(catalog_, name));
  if (arch == 0) {
    ensure_device();
    arch = info_.arch;
  }
  return chain_.query(*entry, arch).key();
}

LoadPlan Registry::Impl::plan(std::string_view name) {
  const KernelEntry* entry = find(name);
  if (!entry) throw Error(Errc::unknown_kernel, unknown_kernel_message(catalog_, name));
  LoadPlan plan;
  if (catalog_.units[entry->unit].linked) {
    plan.reason = {Errc::no_binary, linked_unit_message(catalog_, *entry)};
    return plan;
  }
  try {
    ensure_device();
  } catch (const Error& e) {  // no driver, no device, or a failed device query: say so, do not throw
    plan.reason = {e.code(), e.what()};
    return plan;
  }
  const std::size_t index = static_cast<std::size_t>(entry - catalog_.kernels.data());
  if (const Loaded* loaded = slots_[index].loaded.load(std::memory_order_acquire)) {
    plan.available = true;
    plan.tier = Tier::memory;
    plan.source = loaded->kernel.provenance.source;
    plan.arch = loaded->kernel.provenance.arch;
    plan.ptx = loaded->kernel.provenance.ptx;
    return plan;
  }
  const auto probe = chain_.probe(query(*entry));
  if (!probe) {
    plan.reason = {Errc::no_binary, probe.error()};
    return plan;
  }
  plan.available = true;
  static_cast<Origin&>(plan) = *probe;
  plan.tier = probe->source;
  return plan;
}

void Registry::Impl::ensure_device() {
  // If this throws, the flag stays unset and a later call tries again (driver() itself fails fast).
  std::call_once(device_once_, [this] {
    const Driver& cu = driver();
    int count = 0;
    check(cu.cuDeviceGetCount(&count), "kiln: cuDeviceGetCount");
    if (ordinal_ < 0 || ordinal_ >= count) {
      throw Error(Errc::no_device, "kiln: no CUDA device " + std::to_string(ordinal_) + " (the driver reports " +
                                       std::to_string(count) + (count == 1 ? " device" : " devices") +
                                       "); pass an ordinal below " + std::to_string(count) + " to Registry");
    }
    const std::string subject = " of device " + std::to_string(ordinal_);
    CUdevice device = 0;
    check(cu.cuDeviceGet(&device, ordinal_), "kiln: cuDeviceGet" + subject);
    int major = 0, minor = 0;
    check(cu.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device),
          "kiln: cuDeviceGetAttribute(COMPUTE_CAPABILITY_MAJOR)" + subject);
    check(cu.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device),
          "kiln: cuDeviceGetAttribute(COMPUTE_CAPABILITY_MINOR)" + subject);
    char name[256] = {};
    check(cu.cuDeviceGetName(name, sizeof name, device), "kiln: cuDeviceGetName" + subject);
    std::size_t memory = 0;
    check(cu.cuDeviceTotalMem(&memory, device), "kiln: cuDeviceTotalMem" + subject);
    int version = 0;
    check(cu.cuDriverGetVersion(&version), "kiln: cuDriverGetVersion");
    DeviceInfo info{ordinal_, name, arch_of(major, minor), version, memory, arch_of(major, minor)};
    // KILN_DEVICE_ARCH=1:80 makes device 1 take sm_80's binaries (a newer GPU runs them): what lets one
    // machine of one kind test a server of mixed architectures (docs/DESIGN.md, "Several GPUs").
    if (const unsigned forced = detail::forced_arch(ordinal_); forced != 0) info.arch = forced;
    // The context takes tens of milliseconds to come up the first time: this device's embedded images
    // are unpacked meanwhile, and the disk entries of units without one read (or, for a unit on neither,
    // a JIT worker started), so that a unit's first load does not wait for zstd, the cache or a worker.
    // A context already up leaves nothing to overlap: a registry of one unit (a program given at run
    // time) then reads it on its first get, sparing a thread and the hand-over (~0.1 ms of a disk hit).
    unsigned flags = 0;
    int active = 0;
    const bool up = cu.cuDevicePrimaryCtxGetState(device, &flags, &active) == CUDA_SUCCESS && active != 0;
    if (!up || catalog_.units.size() > 1) prefetch_ = std::make_unique<detail::Prefetch>(chain_, info.arch);
    // Retained last, so that a failure above leaves nothing to release.
    CUcontext context = nullptr;
    check(cu.cuDevicePrimaryCtxRetain(&context, device), "kiln: cuDevicePrimaryCtxRetain" + subject);

    info_ = std::move(info);
    cu_device_ = device;
    context_ = context;
  });
}

DeviceInfo Registry::Impl::device() {
  ensure_device();
  return info_;
}

CUcontext Registry::Impl::context() {
  ensure_device();
  live_context_id();  // a context reset since: make it live again, so the caller can push it
  return context_;
}

RegistryStats Registry::Impl::stats() const noexcept {
  return {unit_loads_.load(std::memory_order_relaxed), kernel_loads_.load(std::memory_order_relaxed),
          disk_loads_.load(std::memory_order_relaxed), remote_loads_.load(std::memory_order_relaxed),
          jit_compiles_.load(std::memory_order_relaxed), context_reloads_.load(std::memory_order_relaxed)};
}

void Registry::check_belongs(const Catalog& catalog, std::string_view name) const {
  const Catalog& catalog_ = impl_->catalog_;
  if (&catalog == &catalog_) return;
  throw Error(Errc::unknown_kernel, "kiln: kernel '" + std::string(name) + "' is registry '" + std::string(catalog.name) +
                                        "''s; this registry is '" + std::string(catalog_.name) +
                                        "': get it from a Registry of its own catalog");
}

Registry::Registry(const Catalog& catalog, int device, RegistryOptions options)
    : impl_(std::make_unique<Impl>(catalog, device, options)) {}
Registry::Registry(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Registry::~Registry() = default;

Kernel Registry::get(std::string_view name) { return impl_->get(name); }
Kernel Registry::get(std::string_view name, const LinkedSource& link) { return impl_->get(name, link); }
LoadPlan Registry::plan(std::string_view name) { return impl_->plan(name); }
DeviceInfo Registry::device() { return impl_->device(); }
CUcontext Registry::context() { return impl_->context(); }
RegistryStats Registry::stats() const noexcept { return impl_->stats(); }
LibraryStats library_stats() noexcept { return detail::library_stats_now(); }
const Catalog& Registry::catalog() const noexcept { return impl_->catalog_; }
CacheKey Registry::cache_key(std::string_view name, unsigned arch) { return impl_->cache_key(name, arch); }
void Registry::request_warmup(const std::vector<std::string>& names) { impl_->request_warmup(names); }
std::vector<std::string> Registry::ensure_warm(const std::vector<std::string>& names, std::chrono::milliseconds timeout) {
  return impl_->ensure_warm(names, timeout);
}
void Registry::precompile_all() { impl_->precompile_all(); }
WarmupStatus Registry::status() { return impl_->status(); }

int context_device(CUcontext context) noexcept {
  if (context == nullptr || !driver_available()) return -1;
  const Driver& cu = driver();
  if (cu.cuCtxPushCurrent(context) != CUDA_SUCCESS) return -1;
  CUdevice device = -1;
  if (cu.cuCtxGetDevice(&device) != CUDA_SUCCESS) device = -1;
  CUcontext popped = nullptr;
  cu.cuCtxPopCurrent(&popped);
  // A CUdevice is a handle: the ordinal is the one cuDeviceGet hands it out for.
  int count = 0;
  if (device < 0 || cu.cuDeviceGetCount(&count) != CUDA_SUCCESS) return -1;
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    CUdevice handle = -1;
    if (cu.cuDeviceGet(&handle, ordinal) == CUDA_SUCCESS && handle == device) return ordinal;
  }
  return -1;
}

int stream_device(CUstream stream) noexcept {
  if (!driver_available()) return -1;
  const Driver& cu = driver();
  CUcontext context = nullptr;
  if (cu.cuStreamGetCtx(stream, &context) != CUDA_SUCCESS) return -1;
  return context_device(context);
}

namespace {

// A kernel launches on the device its registry selected its binary for: a stream (or, without one, a
// current context) of another device is refused, never handed to the driver (a wrong binary, or an
// error naming nothing).
void check_device(const Driver& cu, const Kernel& kernel, CUstream stream, CUcontext current) {
  CUcontext target = current;
  if (stream != nullptr && cu.cuStreamGetCtx(stream, &target) != CUDA_SUCCESS) return;  // the launch says why
  if (target == nullptr || target == kernel.context) return;  // the common case: one pointer compared
  const int want = context_device(kernel.context), got = context_device(target);
  if (want < 0 || got < 0 || want == got) return;
  throw Error(Errc::invalid_argument, "kiln: kernel '" + std::string(kernel.name) + "' was made for device " +
                                          std::to_string(want) + (stream != nullptr ? ", and the stream is device " : ", and the current context is device ") +
                                          std::to_string(got) + "'s: get it from a Registry of device " +
                                          std::to_string(got) + " (its binary is that device's)");
}

}  // namespace

void launch(const Kernel& kernel, Dim3 grid, Dim3 block, unsigned shared_bytes, CUstream stream, void** args) {
  const Driver& cu = driver();
  // As the CUDA runtime does: a thread with no current context gets the device's primary context, so the
  // common path (a registry, get, launch) needs no context calls. One that has one keeps it.
  CUcontext current = nullptr;
  if (kernel.context && cu.cuCtxGetCurrent(&current) == CUDA_SUCCESS && current == nullptr) {
    check(cu.cuCtxSetCurrent(kernel.context), "kiln: cuCtxSetCurrent before launching kernel '" + std::string(kernel.name) + "'");
    current = kernel.context;
  }
  if (kernel.context) check_device(cu, kernel, stream, current);
  const CUresult result = cu.cuLaunchKernel(kernel.launch_handle(), grid.x, grid.y, grid.z, block.x, block.y, block.z,
                                                  shared_bytes, stream, args, nullptr);
  if (result != CUDA_SUCCESS) check(result, "kiln: cuLaunchKernel of kernel '" + std::string(kernel.name) + "'");
}

}  // namespace kiln
