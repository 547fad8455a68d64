// A unit compiled in parts on the JIT pool: its request split into parts, queued as jobs, and their
// outcomes joined into one entry of several images (docs/DESIGN.md, "A unit's kernels over several workers").
#include "jit/pool/pool_state.hpp"

#include "jit/request.hpp"  // part_request

#include <algorithm>

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

}  // namespace

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
  Job job = std::move(queue[index]);
  queue.erase(queue.begin() + static_cast<std::ptrdiff_t>(index));
  const std::size_t kernels = job.request.kernels.size();
  // A part per kernel (the longest of segmented_sort's five took 0.52-0.67 of the whole unit), dealt
  // over the workers where a unit has more kernels than there are.
  const std::size_t count = std::min<std::size_t>(kernels, std::max(1u, max_workers));
  auto whole = std::make_shared<UnitParts>();
  whole->kernels.resize(count);
  for (std::size_t k = 0; k < kernels; ++k) whole->kernels[k % count].push_back(k);
  whole->outcomes.resize(count);
  whole->left = count;
  whole->promise = std::move(job.promise);
  // Each part pays the shared cost again (the headers' parse); the code is shared out by kernels.
  const double code_ms = std::max(0.0, job.estimate() - job.split.shared_ms);
  double added = -job.estimate();
  for (std::size_t p = 0; p < count; ++p) {
    Job part{part_request(job.request, whole->kernels[p]), {}, job.family};
    part.queued = job.queued;
    part.whole = whole;
    part.part = p;
    part.estimate_ms = job.split.shared_ms + code_ms * static_cast<double>(whole->kernels[p].size()) / kernels;
    added += part.estimate();
    queue.push_back(std::move(part));
  }
  whole->unit = std::move(job.request);
  whole->unit.headers.clear();
  ++stats.split_units;
  stats.parts += count;
  // A thread for each part beyond the unit's own, as submit adds them for new requests, up to the workers.
  for (std::size_t p = 1; p < count && threads.size() < max_workers; ++p) {
    try {
      add_slot(false);
    } catch (const std::system_error&) {
      break;  // the threads there are take the parts in turn
    }
  }
  return added;
}

}  // namespace kiln::detail
