// `precompile [--arch sm_XX] [--jobs N] [KERNEL...]`: kiln::precompile over the registries, one line per
// unit (a progress bar on a terminal), a count per registry, and an exit status that says whether every
// unit asked for is in the disk cache.
#include <kiln/kiln.hpp>

#include "base/parse.hpp"         // the one parser of counts and architectures
#include "cli/commands.hpp"
#include "cli/output.hpp"
#include "jit/pool/settings.hpp"  // kMaxJitWorkers, the bound --jobs shares with KILN_JIT_WORKERS

#include <unistd.h>

#include <algorithm>
#include <iostream>

namespace kiln::cli {
namespace {

struct Tally {
  std::size_t compiled_and_cached = 0, already_cached = 0, not_cached = 0, failed = 0;
};

// One unit's line: what happened to it, and why when the cache does not hold it now.
std::string line(const PrecompileResult& r) {
  if (r.ok) return (r.compiled ? "compiled and cached  " : "already cached  ") + r.unit + "  " + fixed1(r.ms) + " ms";
  if (r.compiled) return "compiled, not cached  " + r.unit + "  " + fixed1(r.ms) + " ms: " + r.error;
  return "FAILED  " + r.unit;
}

}  // namespace

int precompile(const Invocation& in) {
  unsigned arch = 0, jobs = 0;
  std::vector<std::string> names;
  for (std::size_t i = 0; i < in.args.size(); ++i) {
    const std::string_view a = in.args[i];
    if (a == "--arch" || a == "--jobs") {
      if (i + 1 == in.args.size()) return refuse(in, "precompile", std::string(a) + " needs a value");
      const std::string_view v = in.args[++i];
      if (a == "--arch") {
        const auto parsed = detail::parse_arch(v);
        if (!parsed) return refuse(in, "precompile", "--arch: " + parsed.error());
        arch = *parsed;
      } else {
        const auto parsed = detail::parse_count(v, 1, detail::kMaxJitWorkers);
        if (!parsed) return refuse(in, "precompile", "--jobs: " + parsed.error());
        jobs = static_cast<unsigned>(*parsed);
      }
    } else if (a.starts_with("-")) {
      return refuse(in, "precompile", "unknown option '" + std::string(a) + "'");
    } else {
      names.emplace_back(a);
    }
  }
  // A name no registry has is a mistake to report, not a unit to skip.
  for (const auto& n : names) {
    if (std::any_of(in.registries.begin(), in.registries.end(), [&](const Catalog* c) { return c->find(n) != nullptr; }))
      continue;
    for (const Catalog* c : in.registries) std::cerr << unknown_kernel_message(*c, n) << '\n';
    return 2;
  }
  const bool terminal = ::isatty(STDOUT_FILENO);
  bool all_ok = true;
  for (const Catalog* catalog : in.registries) {
    std::vector<std::string> mine;  // the names that belong to this registry
    for (const auto& n : names)
      if (catalog->find(n)) mine.push_back(n);
    if (!names.empty() && mine.empty()) continue;
    unsigned target = arch;
    if (!target) {
      Registry registry(*catalog);
      try {
        target = registry.device().arch;
      } catch (const Error& e) {
        if (e.code() != Errc::no_driver && e.code() != Errc::no_device) throw;
        std::cerr << e.what() << "\n" << in.program << " precompile: no GPU to compile for: pass --arch sm_XX\n";
        return 1;
      }
    }
    std::cout << "registry " << catalog->name << ": compiling for sm_" << target << '\n';
    Tally tally;
    kiln::precompile(*catalog, target, mine, jobs, [&](const PrecompileResult& r, std::size_t done, std::size_t total) {
      if (r.ok) ++(r.compiled ? tally.compiled_and_cached : tally.already_cached);
      else ++(r.compiled ? tally.not_cached : tally.failed);
      if (terminal) {
        const std::size_t width = 30, filled = width * done / total;
        std::cout << "\r[" << std::string(filled, '#') << std::string(width - filled, ' ') << "] " << done << "/" << total
                  << " " << r.unit << "\033[K" << std::flush;
        if (!r.ok) std::cout << "\r" << line(r) << "\033[K\n";
        else if (done == total) std::cout << '\n';
      } else {
        std::cout << line(r) << '\n';
      }
      if (!r.ok && !r.compiled) std::cerr << r.error << '\n';
    });
    std::cout << "registry " << catalog->name << ", sm_" << target << ": " << tally.compiled_and_cached
              << " compiled and cached, " << tally.already_cached << " already cached, " << tally.not_cached
              << " compiled but not cached, " << tally.failed << " failed\n";
    all_ok = all_ok && tally.not_cached == 0 && tally.failed == 0;
  }
  return all_ok ? 0 : 1;
}

}  // namespace kiln::cli
