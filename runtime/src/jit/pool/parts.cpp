// A unit compiled in parts on the JIT pool: its request split into parts, queued as jobs, and their
// outcomes joined into one entry of several images (docs/DESIGN.md, "A unit's kernels over several workers").
#include "jit/pool/pool_state.hpp"

#include "jit/request.hpp"  // part_request

#include <algorithm>
#include <string>
#include <vector>

namespace kiln::detail {

struct UnitParts {
  std::mutex mutex;
  std::promise<CompileOutcome> promise;
  CompileRequest unit;  // the unit's request without its headers: its kernels, for the entry and messages
  std::vector<std::vector<std::size_t>> kernels;  // each part's, as indices into unit.kernels
  std::vector<CompileOutcome> outcomes;
  std::exception_ptr error;  // the first part's that ended with one
  std::size_t left = 0;
};

namespace {

std::string kernel_list(const UnitParts& u, std::size_t part) {
  std::string out;
  for (const std::size_t k : u.kernels[part]) out += (out.empty() ? "" : ", ") + u.unit.kernels[k].name;
  return out;
}

// The parts' outcomes as the unit's: one entry of their images, or the first failed part's error.
CompileOutcome join(UnitParts& u) {
  CompileOutcome out;
  const std::string of = " of " + std::to_string(u.outcomes.size());
  for (std::size_t p = 0; p < u.outcomes.size(); ++p) {
    CompileOutcome& part = u.outcomes[p];
    out.nvrtc_ms += part.nvrtc_ms;
    out.link_ms += part.link_ms;
    out.globals_removed += part.globals_removed;
    if (!part.entry) {
      out.entry = fail(part.entry.error() + " (part " + std::to_string(p + 1) + of + ", kernels " + kernel_list(u, p) + ")");
      out.log = std::move(part.log);
      return out;
    }
    if (!part.log.empty()) out.log += "part " + std::to_string(p + 1) + of + ":\n" + part.log + "\n";
  }
  CacheEntry entry;
  CacheEntry& first = *u.outcomes.front().entry;
  entry.arch = first.arch;
  entry.options = first.options;
  entry.compiler = first.compiler;
  entry.kernels.resize(u.unit.kernels.size());
  for (std::size_t p = 0; p < u.outcomes.size(); ++p) {
    CacheEntry& part = *u.outcomes[p].entry;
    CachedImage image;
    image.cubin = std::move(part.cubin);
    // A part's entry lists its kernels in its request's order, the unit's kernels[p] (part_request).
    for (std::size_t j = 0; j < u.kernels[p].size() && j < part.kernels.size(); ++j) {
      entry.kernels[u.kernels[p][j]] = std::move(part.kernels[j]);
      image.kernels.push_back(static_cast<std::uint32_t>(u.kernels[p][j]));
    }
    entry.parts.push_back(std::move(image));
  }
  out.entry = std::move(entry);
  return out;
}

// Whether a kernel's name expression names a template's instance: NVRTC compiles one of those only where
// its expression is given, but a plain __global__ function wherever its source is compiled, so every part
// of its unit compiles it again.
bool is_instance(const std::string& expression) { return expression.find('<') != std::string::npos; }

// The share of the unit's code a part compiles: its own template instances, and every plain kernel. Without
// known shares, its kernels' count over the unit's.
double part_share(const CompileRequest& unit, const UnitSplit& split, const std::vector<std::size_t>& kernels) {
  const std::vector<double>& shares = split.kernel_shares;
  const std::size_t n = unit.kernels.size();
  if (shares.size() != n || n == 0) return n == 0 ? 1.0 : static_cast<double>(kernels.size()) / static_cast<double>(n);
  double share = 0;
  for (std::size_t k = 0; k < n; ++k)
    if (k < unit.expressions.size() && !is_instance(unit.expressions[k])) share += shares[k];
  for (const std::size_t k : kernels)
    if (k < unit.expressions.size() && is_instance(unit.expressions[k])) share += shares[k];
  return std::min(1.0, share);
}

// The cost model's constants. A unit of kSplitOptimizerKernels or more on the critical path compiles whole
// on every core's threads in this share of its one-thread time (segmented_sort_i32: 0.68, docs/DESIGN.md,
// "Threads inside a unit"); parts must end within kSplitGain of that to be worth their extra work (each
// pays the shared cost again, on cores the rest of the table needs).
constexpr double kThreadedWholeFraction = 0.68;
constexpr double kSplitGain = 0.75;

std::string ms_text(double ms) { return std::to_string(static_cast<long long>(ms + 0.5)) + " ms"; }

}  // namespace

std::vector<std::vector<std::size_t>> deal_kernels(std::size_t kernels, std::size_t count, const std::vector<double>& shares) {
  std::vector<std::vector<std::size_t>> parts(std::max<std::size_t>(1, count));
  if (shares.size() != kernels) {
    for (std::size_t k = 0; k < kernels; ++k) parts[k % parts.size()].push_back(k);
    return parts;
  }
  std::vector<std::size_t> order(kernels);
  for (std::size_t k = 0; k < kernels; ++k) order[k] = k;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return shares[a] > shares[b]; });
  std::vector<double> load(parts.size());
  for (std::size_t i = 0; i < order.size(); ++i) {
    // Every part gets one kernel first, then the largest left goes to the part with the least.
    const std::size_t p = i < parts.size() ? i
                          : static_cast<std::size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    parts[p].push_back(order[i]);
    load[p] += shares[order[i]];
  }
  for (auto& p : parts) std::sort(p.begin(), p.end());  // each part's kernels in the unit's order
  return parts;
}

SplitCost JitPool::State::split_cost(const Job& job) const {
  SplitCost cost;
  const std::size_t n = job.request.kernels.size();
  const double whole = job.estimate();
  const bool threaded = cores > 1 && n >= kSplitOptimizerKernels;
  cost.whole_ms = whole * (threaded ? kThreadedWholeFraction : 1.0);
  const std::string against = " against " + ms_text(cost.whole_ms) + " whole";
  if (job.split.kernel_shares.size() != n) {
    cost.why = "whole: its kernels' code sizes are not known (no embedded cubin)";
    return cost;
  }
  if (std::none_of(job.request.expressions.begin(), job.request.expressions.end(), is_instance)) {
    cost.why = "whole: no kernel is a template's instance, so every part would compile all of them";
    return cost;
  }
  const auto parts = deal_kernels(n, std::min<std::size_t>(n, std::max(1u, max_workers)), job.split.kernel_shares);
  double longest = 0;
  for (const auto& p : parts) longest = std::max(longest, part_share(job.request, job.split, p));
  cost.longest_ms = job.split.shared_ms + std::max(0.0, whole - job.split.shared_ms) * longest;
  cost.pays = cost.longest_ms < kSplitGain * cost.whole_ms;
  cost.why = std::string(cost.pays ? "parts" : "whole") + ": its longest of " + std::to_string(parts.size()) +
             " parts " + ms_text(cost.longest_ms) + against;
  return cost;
}

std::string JitPool::State::Job::part_label() const {
  return std::to_string(part + 1) + "/" + std::to_string(whole->kernels.size());
}

void JitPool::State::Job::finish(CompileOutcome outcome) {
  if (!whole) return promise.set_value(std::move(outcome));
  const std::lock_guard lock(whole->mutex);
  whole->outcomes[part] = std::move(outcome);
  if (--whole->left > 0) return;
  if (whole->error) return whole->promise.set_exception(whole->error);
  whole->promise.set_value(join(*whole));
}

void JitPool::State::Job::finish(std::exception_ptr error) {
  if (!whole) return promise.set_exception(error);
  const std::lock_guard lock(whole->mutex);
  if (!whole->error) whole->error = error;
  if (--whole->left > 0) return;
  whole->promise.set_exception(whole->error);
}

double JitPool::State::split_job(std::size_t index) {
  const std::size_t kernels = queue[index].request.kernels.size();
  // A part per kernel (the longest of segmented_sort's five took 0.52-0.91 of the whole unit), dealt
  // over the workers where a unit has more kernels than there are.
  const std::size_t count = std::min<std::size_t>(kernels, std::max(1u, max_workers));
  auto whole = std::make_shared<UnitParts>();
  whole->kernels = deal_kernels(kernels, count, queue[index].split.kernel_shares);
  std::vector<CompileRequest> requests;
  for (std::size_t p = 0; p < count; ++p) {
    Result<CompileRequest> part = part_request(queue[index].request, whole->kernels[p]);
    if (!part) {
      // Parts that cannot be made: the unit compiles whole (and is not weighed again).
      queue[index].split.splittable = false;
      trace.split(queue[index].request.registry + "/" + queue[index].request.unit, queue[index].request.arch, false,
                  part.error(), queue[index].estimate(), 0);
      return 0;
    }
    requests.push_back(std::move(part).value());
  }
  Job job = std::move(queue[index]);
  queue.erase(queue.begin() + static_cast<std::ptrdiff_t>(index));
  whole->outcomes.resize(count);
  whole->left = count;
  whole->promise = std::move(job.promise);
  // Each part pays the shared cost again (the headers' parse); the code is shared out by kernels.
  const double code_ms = std::max(0.0, job.estimate() - job.split.shared_ms);
  double added = -job.estimate();
  for (std::size_t p = 0; p < count; ++p) {
    Job part{std::move(requests[p]), {}, job.family};
    part.queued = job.queued;
    part.whole = whole;
    part.part = p;
    part.estimate_ms = job.split.shared_ms + code_ms * part_share(job.request, job.split, whole->kernels[p]);
    added += part.estimate();
    queue.push_back(std::move(part));
  }
  whole->unit = std::move(job.request);
  whole->unit.headers.clear();
  ++stats.split_units;
  stats.parts += count;
  // A thread for each part beyond the unit's own, as submit adds them for new requests, up to the workers.
  for (std::size_t p = 1; p < count && threads.size() < max_workers; ++p) {
    if (!add_slot(false)) break;  // the threads there are take the parts in turn
  }
  return added;
}

}  // namespace kiln::detail
