// Registry::get with a LinkedSource: a unit linked with code given at run time, from memory, the disk
// cache, or the JIT tier's workers (docs/DESIGN.md, "Operators at run time").
#include <kiln/error.hpp>
#include <kiln/registry.hpp>
#include <kiln/select.hpp>

#include "disk/cache_internal.hpp"
#include "disk/key.hpp"
#include "disk/unit_key.hpp"
#include "jit/jit_tier.hpp"
#include "remote/remote_tier.hpp"
#include "registry/linked_units.hpp"

#include <chrono>
#include <optional>
#include <string>

namespace kiln {
namespace {

void check_linked(CUresult result, std::string_view call, const Catalog& catalog, const KernelEntry& kernel,
                  const LinkedSource& link) {
  if (result == CUDA_SUCCESS) return;
  check(result, "kiln: " + std::string(call) + " for kernel '" + std::string(catalog.str(kernel.name)) +
                    "' linked with " + link.name);
}

// What identifies a link in memory and on disk: its bytes, and whether they are text or LTO-IR.
std::string identity(const LinkedSource& link) { return link.lto_ir ? "lto-ir\n" + link.source : link.source; }

}  // namespace

Kernel Registry::get(std::string_view name, const LinkedSource& link) {
  const auto start = std::chrono::steady_clock::now();
  const KernelEntry* entry = find(name);
  if (!entry) throw Error(Errc::unknown_kernel, unknown_kernel_message(catalog_, name));
  if (!catalog_.units[entry->unit].linked) {
    throw Error(Errc::unknown_kernel, "kiln: kernel '" + std::string(name) + "' of registry '" +
                                          std::string(catalog_.name) + "' is not of a linked unit: nothing is "
                                          "linked into it; get it without " + link.name);
  }
  ensure_device();
  const Driver& cu = driver();
  live_context_id();  // a reset context comes back to life before anything is loaded into it
  std::lock_guard lock(linked_->mutex);
  const std::string linked = identity(link);
  const auto key = std::make_pair(entry->unit, detail::sha256_hex(linked));
  auto found = linked_->units.find(key);
  if (found == linked_->units.end()) {
    // Built in full before it is kept: a link that throws leaves nothing behind.
    auto unit = std::make_unique<LinkedUnits::Unit>();
    const std::string unit_name(catalog_.str(catalog_.units[entry->unit].name));
    DiskCache& cache = disk();
    // The unit's kernels as the binary embeds them (LTO-IR), for the device or an older architecture:
    // then the code, CUB's policies included, is that architecture's, and the key and provenance say so.
    const BinaryEntry* lto_ir = select_lto_ir(catalog_, catalog_.units[entry->unit], info_.arch);
    const unsigned code_arch = lto_ir != nullptr ? lto_ir->arch : info_.arch;
    const CacheKey cache_key =
        detail::linked_cache_key(catalog_, catalog_.units[entry->unit], info_.arch, cache, linked, code_arch);
    // The disk tier's way first (no lock, no pool): an entry that is not this unit's is removed, as a
    // corrupt one is, and built again below.
    std::optional<CacheEntry> cached;
    if (cache.usable()) {
      cached = detail::load_checked(cache, cache_key, [&](const CacheEntry& e) {
        return detail::entry_serves_unit(catalog_, entry->unit, e);
      });
    }
    if (cached) {
      unit->image.source = Tier::disk;
      unit->image.owned = std::move(cached->cubin);
      unit->image.cache_key = cache_key.hex;
    } else if (options_.use_jit) {
      // Once fleet-wide: another machine's entry for this text from the remote cache, else built here and
      // published there (the JIT tier's single flight).
      detail::BuiltUnit built = detail::build_linked_into_cache(catalog_, entry->unit, info_.arch, cache,
                                                                detail::remote_of(options_), cache_key, link, lto_ir);
      unit->image.source = built.compiled ? Tier::jit : built.from_remote ? Tier::remote : Tier::disk;
      unit->image.owned = std::move(built.entry.cubin);
      unit->image.cache_key = std::move(built.key);
      if (built.compiled) jit_compiles_.fetch_add(1, std::memory_order_relaxed);
    } else {
      throw Error(Errc::no_binary, "kiln: unit '" + unit_name + "' linked with " + link.name +
                                       " is not in the disk cache for sm_" + std::to_string(info_.arch) +
                                       " and the JIT tier is off (RegistryOptions::use_jit): turn it on to build it");
    }
    if (unit->image.source == Tier::disk) disk_loads_.fetch_add(1, std::memory_order_relaxed);
    if (unit->image.source == Tier::remote) remote_loads_.fetch_add(1, std::memory_order_relaxed);
    unit->image.served_by = unit->image.source;
    unit->image.arch = code_arch;
    unit->image.label = "sm_" + std::to_string(info_.arch) + " linked with " + link.name +
                        (lto_ir != nullptr ? " (the embedded " + binary_label(*lto_ir) + ")" : "");
    check_linked(cu.cuLibraryLoadData(&unit->library, unit->image.data(), nullptr, nullptr, 0, nullptr, nullptr, 0),
                 "cuLibraryLoadData", catalog_, *entry, link);
    unit_loads_.fetch_add(1, std::memory_order_relaxed);
    found = linked_->units.emplace(key, std::move(unit)).first;
  }
  LinkedUnits::Unit* slot = found->second.get();
  const std::string lowered(catalog_.str(entry->lowered));
  CUkernel kernel = nullptr;
  check_linked(cu.cuLibraryGetKernel(&kernel, slot->library, lowered.c_str()), "cuLibraryGetKernel", catalog_, *entry,
               link);
  CUfunction function = nullptr;
  check(cu.cuCtxPushCurrent(context_), "kiln: cuCtxPushCurrent of the primary context");
  const CUresult got = cu.cuKernelGetFunction(&function, kernel);
  CUcontext popped = nullptr;
  cu.cuCtxPopCurrent(&popped);
  check_linked(got, "cuKernelGetFunction", catalog_, *entry, link);
  const auto index = static_cast<std::uint32_t>(entry - catalog_.kernels.data());
  const Tier tier = slot->handed_out.insert(index).second ? slot->image.source : Tier::memory;
  if (tier != Tier::memory) kernel_loads_.fetch_add(1, std::memory_order_relaxed);
  const double load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return Kernel{catalog_.str(entry->name), catalog_.str(entry->lowered), kernel, function, context_,
                Provenance{tier, slot->image.source, slot->image.arch, false, load_ms, slot->image.cache_key}};
}

}  // namespace kiln
