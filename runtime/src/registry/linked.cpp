// Registry::get with a LinkedSource: a unit linked with code given at run time, from memory, else through
// the chain under the link's key (docs/DESIGN.md, "Operators at run time").
#include <kiln/error.hpp>
#include <kiln/registry.hpp>
#include <kiln/select.hpp>

#include "chain/key.hpp"  // sha256_hex
#include "chain/tier_chain.hpp"
#include "registry/libraries.hpp"
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

}  // namespace

Kernel Registry::Impl::get(std::string_view name, const LinkedSource& link) {
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
  const auto key = std::make_pair(entry->unit, detail::sha256_hex(detail::link_identity(link)));
  auto found = linked_->units.find(key);
  if (found == linked_->units.end()) {
    // Built in full before it is kept: a link that throws leaves nothing behind. The chain serves it as it
    // serves any unit, under the link's own key: the disk cache, the remote cache, then the JIT tier's
    // workers (the unit and link.source to LTO-IR, nvJitLink -lto), published to the stores.
    auto unit = std::make_unique<LinkedUnits::Unit>();
    try {
      unit->image = chain_.fetch(query(*entry, &link));
    } catch (const Error& e) {
      if (e.code() != Errc::no_binary) throw;
      throw Error(Errc::no_binary, "kiln: unit '" + std::string(catalog_.str(catalog_.units[entry->unit].name)) +
                                       "' linked with " + link.name + " is not in the disk cache for sm_" +
                                       std::to_string(info_.arch) + (options_.use_jit ? "" : " and the JIT tier is off "
                                       "(RegistryOptions::use_jit): turn it on to build it") +
                                       (e.what()[0] != '\0' ? std::string(" (") + e.what() + ")" : std::string()));
    }
    count_served(unit->image);
    // The unit's kernels as the binary embeds them (LTO-IR), for the device or an older architecture:
    // then the code, CUB's policies included, is that architecture's, and the key and provenance say so.
    const BinaryEntry* lto_ir = select_lto_ir(catalog_, catalog_.units[entry->unit], info_.arch);
    unit->image.arch = lto_ir != nullptr ? lto_ir->arch : info_.arch;
    unit->image.label = "sm_" + std::to_string(info_.arch) + " linked with " + link.name +
                        (lto_ir != nullptr ? " (the embedded " + binary_label(*lto_ir) + ")" : "");
    unit->library = detail::acquire_library(image_identity(unit->image, entry->unit), unit->image.owned,
                                            "kernel '" + std::string(name) + "' linked with " + link.name);
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
                Provenance{Origin{slot->image.source, slot->image.arch, false}, tier, load_ms, slot->image.cache_key},
                {}};  // keeps_loaded: none, as for any kernel of a Registry
}

}  // namespace kiln
