// The tier chain's order, and its walks: fetch (get), probe (plan, why), ahead (the prefetch), precompile.
#include "chain/tier_chain.hpp"

#include <kiln/error.hpp>

#include <utility>

namespace kiln::detail {

namespace {

// The tiers' reasons for missing, in chain order: the embedded tier's names the kernel and what is
// embedded, the others add what they found.
void add_reason(std::string& message, const std::string& reason) {
  if (reason.empty()) return;
  if (!message.empty()) message += "; ";
  message += reason;
}

const KernelEntry* first_kernel_of(const Catalog& catalog, std::uint32_t unit) {
  for (const KernelEntry& k : catalog.kernels)
    if (k.unit == unit) return &k;
  return nullptr;
}

}  // namespace

TierChain::TierChain(const Catalog& catalog, const RegistryOptions& options, ChainParts parts,
                     std::shared_ptr<const UnitSource> given)
    : catalog_(catalog), options_(options), parts_(std::move(parts)), given_(std::move(given)) {}

DiskCache& TierChain::cache() const { return options_.cache ? *options_.cache : parts_.default_cache(); }

CompilerVersions TierChain::compilers() const {
  std::call_once(compilers_once_, [this] { compilers_ = parts_.compilers(cache()); });
  return compilers_;
}

std::vector<std::unique_ptr<UnitStore>> TierChain::stores() const { return parts_.stores(cache(), options_); }

UnitQuery TierChain::query(const KernelEntry& kernel, unsigned arch, const LinkedSource* link) const {
  return UnitQuery{*this, catalog_, kernel, arch, options_, link};
}

const TierStep* TierChain::step_of(Tier tier) const {
  for (const TierStep& step : parts_.tiers)
    if (step.tier == tier) return &step;
  return nullptr;
}

UnitImage TierChain::fetch(const UnitQuery& query) const {
  std::string reasons;
  for (const TierStep& step : parts_.tiers) {
    Result<UnitImage> image = step.fetch(query);
    if (image) {
      image->tier = step.tier;
      return std::move(image).value();
    }
    add_reason(reasons, image.error());
  }
  throw Error(Errc::no_binary, reasons);
}

Result<Origin> TierChain::probe(const UnitQuery& query) const {
  std::string reasons;
  for (const TierStep& step : parts_.tiers) {
    Result<Origin> probe = step.probe(query);
    if (probe) return probe;
    add_reason(reasons, probe.error());
  }
  return fail(reasons);
}

Explanation TierChain::explain(const KernelEntry& kernel, unsigned arch) const {
  const UnitQuery q = query(kernel, arch);
  Explanation e;
  Result<Origin> probe = this->probe(q);
  if (!probe) {
    e.reason = probe.error();
    return e;
  }
  e.available = true;
  e.origin = *probe;
  e.compiles = e.origin.source == Tier::ptx || e.origin.source == Tier::jit;
  // A binary the PTX tier assembles is kept under the PTX's own key (its code= line), whether it is on
  // disk already or not: the key the tier that answered looks up.
  if (e.origin.source != Tier::embedded) e.key = q.key(e.origin.ptx ? e.origin.arch : 0);
  return e;
}

std::optional<UnitImage> TierChain::ahead(const UnitQuery& query, Tier tier) const {
  const TierStep* step = step_of(tier);
  if (step == nullptr || step->ahead == nullptr) return std::nullopt;
  Result<UnitImage> image = step->ahead(query);
  if (!image) return std::nullopt;
  image->tier = tier;
  return std::move(image).value();
}

void TierChain::served(const UnitQuery& query, const UnitImage& image) const {
  const TierStep* step = step_of(image.tier);
  if (step != nullptr && step->served != nullptr) step->served(query);
}

void TierChain::prepare_build(const UnitQuery& query, Tier after) const {
  bool past = false;
  for (const TierStep& step : parts_.tiers) {
    if (past && step.prepare != nullptr) {
      step.prepare(query);
      return;
    }
    past = past || step.tier == after;
  }
}

PrecompiledUnit TierChain::precompile(std::uint32_t unit, unsigned arch, const LinkedSource* link) const {
  const KernelEntry* kernel = first_kernel_of(catalog_, unit);
  if (kernel == nullptr)
    throw Error(Errc::invalid_argument, "kiln: unit '" + std::string(catalog_.str(catalog_.units[unit].name)) +
                                            "' of registry " + std::string(catalog_.name) + " has no kernel");
  const UnitImage image = fetch(query(*kernel, arch, link));
  PrecompiledUnit p;
  PrecompileResult& r = p.result;
  r.unit = std::string(catalog_.str(catalog_.units[unit].name));
  r.compiled = image.source == Tier::jit;
  r.cached = !r.compiled;
  r.from_remote = image.source == Tier::remote;
  r.ok = r.cached || image.stored.ok();
  if (!r.ok) r.error = {Errc::cache, "the disk cache did not keep it: " + image.stored.error()};
  p.cache_key = image.cache_key;
  p.bytes = image.bytes();
  return p;
}

}  // namespace kiln::detail
