// The process-wide pool of kiln-jitd workers: made on first use, never destroyed.
#include "jit/jit_pool.hpp"

#include <kiln/error.hpp>

#include <chrono>
#include <cstdlib>

namespace kiln::detail {
namespace {

// At exit the pool stops, within a bound: no worker compiles, and no PCH is written, after the process
// that asked for it has ended (a worker also dies with its host thread, jit/worker/serve.hpp).
constexpr std::chrono::seconds kShutdownBound{2};

// The machine-wide compile budget's slots live in the default cache directory: the processes that share
// it (one per GPU, say) share the budget (docs/DESIGN.md, "A machine-wide compile budget").
JitPoolOptions process_options() {
  JitPoolOptions options;
  DiskCache& cache = default_cache();
  if (cache.usable()) options.budget_dir = cache.config().dir;
  return options;
}

JitPool& pool() {
  // Leaked on purpose: registries destroyed during static destruction may still ask it (a stopped pool
  // fails their requests at once).
  static JitPool& instance = [] () -> JitPool& {
    JitPool& p = *new JitPool(process_options());
    std::atexit([] { pool().shutdown(kShutdownBound); });
    return p;
  }();
  return instance;
}

}  // namespace

CompileOutcome jit_compile(const CompileRequest& request, PchFamily family, double estimate_ms, UnitSplit split) {
  return pool().compile(request, std::move(family), estimate_ms, split);
}

CacheEntry jit_compile_entry(const CompileRequest& request, PchFamily family, double estimate_ms, UnitSplit split) {
  CompileOutcome outcome = jit_compile(request, std::move(family), estimate_ms, split);
  if (!outcome.entry) throw Error(Errc::compile, outcome.entry.error() + "\n" + outcome.log);
  return std::move(outcome.entry).value();
}

void start_jit_workers(unsigned arch) { pool().start_ahead(arch); }

unsigned jit_parallelism() { return pool().max_workers(); }

JitPoolStats jit_pool_stats() { return pool().stats(); }

}  // namespace kiln::detail
