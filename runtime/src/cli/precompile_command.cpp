// `precompile [--arch sm_XX]... [--jobs N] [KERNEL...]`: kiln::precompile over the registries, for each arch
// given (none: each visible device's), one line per unit (a progress bar on a terminal), a count per registry and arch, and an exit status
// that says whether every unit asked for is in the disk cache. Registries compile at once unless --jobs bounds the units in flight.
#include <kiln/catalog.hpp>
#include <kiln/kiln.hpp>
#include <kiln/precompile.hpp>
#include <kiln/record.hpp>
#include <kiln/select.hpp>

#include "base/parse.hpp"         // the one parser of counts and architectures
#include "base/thread_start.hpp"
#include "base/plain_file.hpp"    // open_regular: a --link FILE that cannot block
#include "cli/commands.hpp"
#include "cli/devices.hpp"
#include "cli/output.hpp"
#include "jit/pool/settings.hpp"  // kMaxJitWorkers, the bound --jobs shares with KILN_JIT_WORKERS

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <functional>
#include <iostream>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

namespace kiln::cli {
namespace {

struct Tally {
  std::size_t compiled_and_cached = 0, already_cached = 0, not_cached = 0, failed = 0;
  std::size_t removed = 0;  // already cached, and gone from the cache before the call returned
};

// One unit's line, the unit called `unit`: what happened to it, and why when the cache does not hold it now.
std::string line(const PrecompileResult& r, const std::string& unit) {
  if (r.ok) {
    return (r.compiled ? "compiled and cached  " : r.from_remote ? "fetched from the fleet  " : "already cached  ") + unit +
           "  " + fixed1(r.ms) + " ms";
  }
  if (r.compiled) return "compiled, not cached  " + unit + "  " + fixed1(r.ms) + " ms: " + r.error.message;
  return "FAILED  " + unit;
}

// How many units kiln::precompile compiles of `catalog` for `names` (every unit it can when empty).
std::size_t units_of(const Catalog& catalog, const std::vector<std::string>& names) {
  std::set<std::uint32_t> units;
  for (std::uint32_t u = 0; u < catalog.units.size(); ++u)
    if (names.empty() && !catalog.units[u].linked) units.insert(u);
  for (const auto& n : names)
    if (const KernelEntry* k = catalog.find(n)) units.insert(k->unit);
  return units.size();
}

// `precompile --record FILE --arch sm_XX...`: every program and table kernel the record names, compiled for
// each architecture into the disk cache, one line per unit; exit 1 unless every one is there.
int precompile_record_file(const Invocation& in, const std::string& path, const std::vector<unsigned>& archs,
                           const std::vector<std::string>& names) {
  if (archs.empty()) return refuse(in, "precompile", "--record needs --arch: the architectures to compile it for");
  if (!names.empty()) return refuse(in, "precompile", "--record takes no kernel names: the record names them");
  const DemandRecord record = read_record(path);
  bool all_ok = true;
  for (const unsigned arch : archs) {
    std::size_t ok = 0, failed = 0;
    for (const PrecompileResult& r : precompile_record(record, arch, {in.registries.begin(), in.registries.end()})) {
      std::cout << line(r, r.unit) << (archs.size() > 1 ? " sm_" + std::to_string(arch) : std::string()) << '\n';
      if (!r.ok && !r.compiled) std::cerr << r.error.message << '\n';
      (r.ok ? ok : failed) += 1;
    }
    std::cout << "record " << path << ", sm_" << arch << ": " << ok << " in the cache, " << failed << " not\n";
    all_ok = all_ok && failed == 0;
  }
  return all_ok ? 0 : 1;
}

// The text of the file `path` a user names (an operator's translation unit): a regular file, at most 16 MiB.
std::string read_link_file(const std::string& path) {
  constexpr std::size_t kMaxBytes = std::size_t{16} << 20;
  auto fd = detail::open_regular(path, O_RDONLY);
  if (!fd) throw Error(Errc::invalid_argument, "kiln: precompile --link: " + fd.error());
  std::string text;
  char buffer[65536];
  for (;;) {
    const ssize_t n = ::read(fd->get(), buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error(Errc::invalid_argument, "kiln: precompile --link: cannot read " + path + ": " + std::strerror(errno));
    if (n == 0) break;
    text.append(buffer, static_cast<std::size_t>(n));
    if (text.size() > kMaxBytes)
      throw Error(Errc::invalid_argument, "kiln: precompile --link: " + path + " is larger than 16 MiB: not an operator's text");
  }
  return text;
}

// `precompile --link FILE --arch sm_XX... [KERNEL...]`: the linked units of the kernels (every linked unit
// when none is named) built with FILE's text as Registry::get(name, LinkedSource) builds them, one line per
// unit; exit 1 unless every one is in the cache.
int precompile_linked_file(const Invocation& in, const std::string& path, const std::vector<unsigned>& archs,
                           const std::vector<std::string>& names) {
  if (archs.empty()) return refuse(in, "precompile", "--link needs --arch: the architectures to build for");
  LinkedSource link;
  link.name = path;
  link.source = read_link_file(path);
  bool all_ok = true, any = false;
  for (const Catalog* catalog : in.registries) {
    std::vector<std::string> mine;
    for (const auto& n : names)
      if (catalog->find(n)) mine.push_back(n);
    if (!names.empty() && mine.empty()) continue;
    if (names.empty() && std::none_of(catalog->units.begin(), catalog->units.end(), [](const UnitEntry& u) { return u.linked; }))
      continue;
    any = true;
    for (const unsigned arch : archs) {
      std::size_t ok = 0, failed = 0;
      for (const PrecompileResult& r : precompile_linked(*catalog, arch, mine, link)) {
        std::cout << line(r, r.unit) << (archs.size() > 1 ? " sm_" + std::to_string(arch) : std::string()) << '\n';
        if (!r.ok && !r.compiled) std::cerr << r.error.message << '\n';
        (r.ok ? ok : failed) += 1;
      }
      std::cout << "registry " << catalog->name << ", sm_" << arch << ", linked with " << path << ": " << ok
                << " in the cache, " << failed << " not\n";
      all_ok = all_ok && failed == 0;
    }
  }
  if (!any) {
    std::cerr << in.program << " precompile: no registry has a linked unit to build with " << path << '\n';
    return 1;
  }
  return all_ok ? 0 : 1;
}

// What `precompile` was asked: the options and the kernels named.
struct Asked {
  std::vector<unsigned> archs;  // each one given, in order, once; none: every visible device's
  unsigned jobs = 0;
  std::vector<std::string> names;
  std::string record;  // --record FILE: what a run recorded (KILN_RECORD), compiled for each --arch
  std::string link;    // --link FILE: the code linked units are built with (an operator's translation unit)
};

// The arguments read into `asked`; else the exit status of their refusal.
std::optional<int> read_arguments(const Invocation& in, Asked& asked) {
  for (std::size_t i = 0; i < in.args.size(); ++i) {
    const std::string_view a = in.args[i];
    if (a == "--record" || a == "--link") {
      if (i + 1 == in.args.size()) return refuse(in, "precompile", std::string(a) + " needs a file");
      (a == "--record" ? asked.record : asked.link) = in.args[++i];
    } else if (a == "--arch" || a == "--jobs") {
      if (i + 1 == in.args.size()) return refuse(in, "precompile", std::string(a) + " needs a value");
      const std::string_view v = in.args[++i];
      if (a == "--arch") {
        const auto parsed = detail::parse_arch(v);
        if (!parsed) return refuse(in, "precompile", "--arch: " + parsed.error());
        if (std::find(asked.archs.begin(), asked.archs.end(), *parsed) == asked.archs.end()) asked.archs.push_back(*parsed);
      } else {
        const auto parsed = detail::parse_count(v, 1, detail::kMaxJitWorkers);
        if (!parsed) return refuse(in, "precompile", "--jobs: " + parsed.error());
        asked.jobs = static_cast<unsigned>(*parsed);
      }
    } else if (a.starts_with("-")) {
      return refuse(in, "precompile", "unknown option '" + std::string(a) + "'");
    } else {
      asked.names.emplace_back(a);
    }
  }
  if (!asked.record.empty() && !asked.link.empty()) return refuse(in, "precompile", "--record and --link: one at a time");
  if (!asked.link.empty() && asked.jobs) return refuse(in, "precompile", "--link builds one unit after another: no --jobs");
  return std::nullopt;
}

// One registry asked for, its units' names and the architecture to compile them for.
struct Work {
  const Catalog* catalog = nullptr;
  std::vector<std::string> mine;
  unsigned target = 0;
  std::size_t units = 0;
  Tally tally;
  std::exception_ptr error;
};

// Each registry asked for, for each architecture; with no --arch, every visible device's (set into
// `asked`). nullopt when the devices could not be listed (said already).
std::optional<std::vector<Work>> plan_work(const Invocation& in, Asked& asked) {
  std::vector<Work> work;
  for (const Catalog* catalog : in.registries) {
    std::vector<std::string> mine;  // the names that belong to this registry
    for (const auto& n : asked.names)
      if (catalog->find(n)) mine.push_back(n);
    if (!asked.names.empty() && mine.empty()) continue;
    if (asked.archs.empty()) {
      // No --arch: every visible device's architecture, each once (a server may mix them).
      const std::optional<std::vector<DeviceInfo>> devices = every_device(in, *catalog, "precompile", "compile for");
      if (!devices) return std::nullopt;
      asked.archs = archs_taken(*devices);
      std::cout << archs_taken_line(*devices) << '\n';
    }
    // Every architecture, each compiled.
    for (const unsigned target : asked.archs) {
      Work& w = work.emplace_back();
      w.catalog = catalog;
      w.units = units_of(*catalog, mine);
      w.mine = mine;
      w.target = target;
    }
  }
  return work;
}

// The registries' runs of kiln::precompile and their output: a line per unit (a progress bar on a
// terminal), from each registry's thread when they run together, then a tally per registry and arch.
class Runs {
 public:
  Runs(std::vector<Work>& work, const Asked& asked)
      : work_(work), jobs_(asked.jobs), several_archs_(asked.archs.size() > 1),
        // Every registry at once, unless --jobs bounds the units in flight: the pool then sees them all and
        // takes the longest first (docs/DESIGN.md, "Scheduling a table").
        together_(asked.jobs == 0 && work.size() > 1) {
    for (const Work& w : work_) total_all_ += w.units;
  }

  // Every registry's run, one after another or together; its tally. 0 when every unit asked for is in
  // the disk cache, else 1.
  int run_all() {
    if (together_) run_together();
    bool all_ok = true;
    for (Work& w : work_) {
      if (!together_) {
        std::cout << "registry " << w.catalog->name << ": compiling for sm_" << w.target << '\n';
        run(w);
      }
      if (w.error) std::rethrow_exception(w.error);
      all_ok = print_tally(w) && all_ok;
    }
    return all_ok ? 0 : 1;
  }

 private:
  // Each registry on a thread of its own; those no thread can be had for, on this one after the others started.
  void run_together() {
    for (const Work& w : work_) std::cout << "registry " << w.catalog->name << ": compiling for sm_" << w.target << '\n';
    std::vector<std::thread> threads;
    std::vector<Work*> here;
    for (Work& w : work_) {
      detail::Result<std::thread> thread = detail::start_thread([this, &w] { run(w); });
      if (thread) threads.push_back(std::move(thread).value());
      else here.push_back(&w);
    }
    for (Work* w : here) run(*w);
    for (auto& t : threads) t.join();
  }

  // kiln::precompile of one registry for one architecture; what it throws is kept for run_all.
  void run(Work& w) {
    try {
      const std::vector<PrecompileResult> results = kiln::precompile(
          *w.catalog, w.target, w.mine, jobs_,
          [&](const PrecompileResult& r, std::size_t done, std::size_t total) { unit_line(w, r, done, total); });
      count(w, results);
    } catch (...) {
      w.error = std::current_exception();
    }
  }

  // Together, a unit is named with its registry (and its arch, when several).
  std::string unit_name(const Work& w, const std::string& unit) const {
    return together_ ? std::string(w.catalog->name) + "." + unit : unit;
  }

  // One unit's progress: its line, or the bar (which counts every registry's, together).
  void unit_line(const Work& w, const PrecompileResult& r, std::size_t done, std::size_t total) {
    const std::lock_guard lock(out_);
    const std::string unit = unit_name(w, r.unit) + (several_archs_ ? " sm_" + std::to_string(w.target) : std::string());
    if (together_) {
      done = ++done_all_;
      total = total_all_;
    }
    if (terminal_) {
      const std::size_t width = 30, filled = width * std::min(done, total) / std::max<std::size_t>(total, 1);
      std::cout << "\r[" << std::string(filled, '#') << std::string(width - filled, ' ') << "] " << done << "/" << total
                << " " << unit << "\033[K" << std::flush;
      if (!r.ok) std::cout << "\r" << line(r, unit) << "\033[K\n";
      else if (done == total) std::cout << '\n';
    } else {
      std::cout << line(r, unit) << '\n';
    }
    if (!r.ok && !r.compiled) std::cerr << r.error.message << '\n';
  }

  // The tally says what is in the cache now; a unit evicted since its line says so again.
  void count(Work& w, const std::vector<PrecompileResult>& results) {
    const std::lock_guard lock(out_);
    Tally& tally = w.tally;
    for (const PrecompileResult& r : results) {
      if (r.ok) ++(r.compiled ? tally.compiled_and_cached : tally.already_cached);
      else if (r.evicted && !r.compiled) ++tally.removed;  // not compiled here: not "compiled, not cached"
      else ++(r.compiled ? tally.not_cached : tally.failed);
      if (r.evicted) std::cout << "evicted  " << unit_name(w, r.unit) << ": " << r.error.message << '\n';
    }
  }

  // The registry's count for its architecture; whether every unit is in the cache.
  static bool print_tally(const Work& w) {
    const Tally& tally = w.tally;
    std::cout << "registry " << w.catalog->name << ", sm_" << w.target << ": " << tally.compiled_and_cached
              << " compiled and cached, " << tally.already_cached << " already cached, " << tally.not_cached
              << " compiled but not cached, " << tally.failed << " failed"
              << (tally.removed ? ", " + std::to_string(tally.removed) + " already cached but gone since" : std::string())
              << '\n';
    return tally.not_cached == 0 && tally.failed == 0 && tally.removed == 0;
  }

  std::vector<Work>& work_;
  const unsigned jobs_;
  const bool several_archs_;
  const bool together_;
  const bool terminal_ = ::isatty(STDOUT_FILENO);
  std::mutex out_;  // progress comes from each registry's thread
  std::size_t done_all_ = 0, total_all_ = 0;
};

}  // namespace

int precompile(const Invocation& in) {
  Asked asked;
  if (const std::optional<int> refused = read_arguments(in, asked)) return *refused;
  if (!asked.record.empty()) return precompile_record_file(in, asked.record, asked.archs, asked.names);
  // A name no registry has is a mistake to report, not a unit to skip.
  if (!all_known(in, asked.names)) return 2;
  if (!asked.link.empty()) return precompile_linked_file(in, asked.link, asked.archs, asked.names);
  std::optional<std::vector<Work>> work = plan_work(in, asked);
  if (!work) return 1;
  return Runs(*work, asked).run_all();
}

}  // namespace kiln::cli
