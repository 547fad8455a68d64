// The process-wide pool of kiln-jitd workers: made on first use, never destroyed.
#include "jit/jit_pool.hpp"

#include <kiln/error.hpp>

namespace kiln::detail {
namespace {

JitPool& pool() {
  // Leaked on purpose: its workers must outlive registries destroyed during static destruction.
  static JitPool& instance = *new JitPool();
  return instance;
}

}  // namespace

CompileOutcome jit_compile(const CompileRequest& request, PchFamily family, double estimate_ms) {
  return pool().compile(request, std::move(family), estimate_ms);
}

CacheEntry jit_compile_entry(const CompileRequest& request, PchFamily family, double estimate_ms) {
  CompileOutcome outcome = jit_compile(request, std::move(family), estimate_ms);
  if (!outcome.entry) throw Error(Errc::compile, outcome.entry.error() + "\n" + outcome.log);
  return std::move(outcome.entry).value();
}

void start_jit_workers(unsigned arch) { pool().start_ahead(arch); }

unsigned jit_parallelism() { return pool().max_workers(); }

JitPoolStats jit_pool_stats() { return pool().stats(); }

}  // namespace kiln::detail
