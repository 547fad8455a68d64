// The tier chain's order, and its walks: fetch (get), probe (plan), and ahead (the prefetch).
#include "chain/tier_chain.hpp"

#include <kiln/error.hpp>

#include <array>

namespace kiln::detail {

namespace {

const std::array<const TierStep*, 5> kChain{&kEmbeddedStep, &kDiskStep, &kRemoteStep, &kPtxStep, &kJitStep};

// The tiers' reasons for missing, in chain order: the embedded tier's names the kernel and what is
// embedded, the others add what they found.
void add_reason(std::string& message, const std::string& reason) {
  if (reason.empty()) return;
  if (!message.empty()) message += "; ";
  message += reason;
}

const TierStep* step_of(Tier tier) {
  for (const TierStep* step : kChain)
    if (step->tier == tier) return step;
  return nullptr;
}

}  // namespace

UnitImage fetch_unit(const UnitQuery& query) {
  std::string reasons;
  for (const TierStep* step : kChain) {
    Result<UnitImage> image = step->fetch(query);
    if (image) {
      image->served_by = step->tier;
      return std::move(image).value();
    }
    add_reason(reasons, image.error());
  }
  throw Error(Errc::no_binary, reasons);
}

Result<Origin> probe_unit(const UnitQuery& query) {
  std::string reasons;
  for (const TierStep* step : kChain) {
    Result<Origin> probe = step->probe(query);
    if (probe) return probe;
    add_reason(reasons, probe.error());
  }
  return fail(reasons);
}

std::optional<UnitImage> fetch_ahead(const UnitQuery& query, Tier tier) {
  const TierStep* step = step_of(tier);
  if (step == nullptr || step->ahead == nullptr) return std::nullopt;
  Result<UnitImage> image = step->ahead(query);
  if (!image) return std::nullopt;
  image->served_by = tier;
  return std::move(image).value();
}

void served(const UnitQuery& query, const UnitImage& image) {
  const TierStep* step = step_of(image.served_by);
  if (step != nullptr && step->served != nullptr) step->served(query);
}

void prepare_build(const UnitQuery& query, Tier after) {
  bool past = false;
  for (const TierStep* step : kChain) {
    if (past && step->prepare != nullptr) {
      step->prepare(query);
      return;
    }
    past = past || step->tier == after;
  }
}

}  // namespace kiln::detail
