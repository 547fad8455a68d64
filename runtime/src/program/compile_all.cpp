// Many programs given at run time compiled at once, handed to the JIT pool as a table's units are.
#include <kiln/program.hpp>

#include "base/thread_start.hpp"
#include "jit/jit_pool.hpp"  // kMaxJitRequestsInFlight

#include <kiln/catalog.hpp>
#include <kiln/error.hpp>
#include <kiln/precompile.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <numeric>
#include <thread>

namespace kiln {
namespace {

// One program made ready (arch 0) or compiled for `arch`, its failure in the result.
PrecompileResult compile_one(Program& program, unsigned arch) {
  PrecompileResult r;
  r.unit = program.label();
  const auto start = std::chrono::steady_clock::now();
  try {
    if (arch != 0) {
      r = program.precompile(arch);
    } else {
      const Catalog& catalog = program.catalog();
      bool compiled = false;
      for (const KernelEntry& k : catalog.kernels) compiled = program.get(catalog.str(k.expression)).provenance.tier == Tier::jit || compiled;
      r.ok = true;
      r.compiled = compiled;
      r.cached = !compiled;
    }
  } catch (const Error& e) {
    r.ok = false;
    r.error = {e.code(), e.what()};
  } catch (const std::exception& e) {
    r.ok = false;
    r.error = {Errc::compile, std::string("kiln: ") + e.what()};
  }
  r.unit = program.label();
  r.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace

std::vector<PrecompileResult> compile_all(const std::vector<std::shared_ptr<Program>>& programs, unsigned arch) {
  std::vector<PrecompileResult> results(programs.size());
  // Longest first: the first requests the pool sees are the ones a table's schedule would start first.
  std::vector<double> estimate(programs.size());
  for (std::size_t i = 0; i < programs.size(); ++i)
    if (programs[i]) estimate[i] = programs[i]->estimate_ms();
  std::vector<std::size_t> order(programs.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return estimate[a] > estimate[b]; });

  // Each thread waits on one program at a time while the pool compiles: as many threads as requests the
  // pool should see at once.
  std::atomic<std::size_t> next{0};
  const auto work = [&] {
    for (std::size_t i; (i = next.fetch_add(1)) < order.size();) {
      const std::size_t at = order[i];
      if (!programs[at]) {
        results[at].error = {Errc::invalid_argument, "kiln: compile_all: program " + std::to_string(at) + " is null"};
        continue;
      }
      results[at] = compile_one(*programs[at], arch);
    }
  };
  const std::size_t wanted = std::min<std::size_t>(programs.size(), detail::kMaxJitRequestsInFlight);
  std::vector<std::thread> threads;
  threads.reserve(wanted);
  for (std::size_t t = 1; t < wanted; ++t) {
    detail::Result<std::thread> thread = detail::start_thread(work);
    if (!thread) break;  // the threads there are, this one included, take the rest
    threads.push_back(std::move(thread).value());
  }
  work();
  for (auto& t : threads) t.join();
  return results;
}

}  // namespace kiln
