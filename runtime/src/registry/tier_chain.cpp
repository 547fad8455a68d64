// The tier chain's order, and its two walks: fetch (get) and probe (plan).
#include "registry/tier_chain.hpp"

#include <kiln/error.hpp>

#include <array>

namespace kiln::detail {

namespace {

constexpr std::array kChain{
    TierStep{Tier::embedded, probe_embedded_cubin, fetch_embedded_cubin},
    TierStep{Tier::disk, probe_disk, fetch_disk},
    TierStep{Tier::remote, probe_remote, fetch_remote},
    TierStep{Tier::ptx, probe_ptx, fetch_ptx},
    TierStep{Tier::jit, probe_jit, fetch_jit},
};

// The tiers' reasons for missing, in chain order: the embedded tier's names the kernel and what is
// embedded, the others add what they found.
void add_reason(std::string& message, const std::string& reason) {
  if (reason.empty()) return;
  if (!message.empty()) message += "; ";
  message += reason;
}

}  // namespace

std::span<const TierStep> tier_chain() { return kChain; }

UnitImage fetch_unit(const UnitQuery& query) {
  std::string reasons;
  for (const TierStep& step : tier_chain()) {
    Result<UnitImage> image = step.fetch(query);
    if (image) {
      image->served_by = step.tier;
      return std::move(image).value();
    }
    add_reason(reasons, image.error());
  }
  throw Error(Errc::no_binary, reasons);
}

Result<UnitProbe> probe_unit(const UnitQuery& query) {
  std::string reasons;
  for (const TierStep& step : tier_chain()) {
    Result<UnitProbe> probe = step.probe(query);
    if (probe) return probe;
    add_reason(reasons, probe.error());
  }
  return fail(reasons);
}

}  // namespace kiln::detail
