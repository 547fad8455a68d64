// The `kiln` command: lists the embedded kernels and shows where each would load from.
#include <kiln/kiln.hpp>

#include "base/parse.hpp"           // the one parser of sizes, counts and architectures
#include "jit/pool/settings.hpp"    // kMaxJitWorkers, the bound --jobs shares with KILN_JIT_WORKERS
#include "examples_catalog.hpp"
#ifdef KILN_WITH_PRIMITIVES
#  include "primitives_catalog.hpp"
#endif

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <unistd.h>
#include <iostream>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace {

// Every registry linked into this tool; add a generated catalog here to have it listed.
using CatalogFn = const kiln::Catalog& (*)();
constexpr CatalogFn catalogs[] = {
    &kiln::examples::catalog,
#ifdef KILN_WITH_PRIMITIVES
    &kiln::prim::catalog,
#endif
};

constexpr std::string_view usage =
    "usage: kiln <command>\n"
    "commands:\n"
    "  list     every registry's units, kernels and embedded binaries with their sizes\n"
    "  info     this machine's GPU, and the tier and binary each kernel would load from\n"
    "  cache stats            the disk cache: where it is, entries, bytes; the remote cache: where, reachable\n"
    "  cache verify           check every entry and precompiled header, remove the bad ones and say why\n"
    "  cache prune [BYTES]    evict least recently used entries down to BYTES (512M, 2G; default: the cap)\n"
    "  cache clear            remove every entry and precompiled header\n"
    "  cache export [--registry R] [--arch sm_XX] FILE\n"
    "           write the matching entries into one verified pack FILE\n"
    "  cache import FILE      check the whole pack FILE, then add its entries (a damaged pack adds nothing)\n"
    "  cache push [--registry R] [--arch sm_XX]\n"
    "           upload the matching entries to the remote cache (KILN_REMOTE_CACHE)\n"
    "  precompile [--arch sm_XX] [--jobs N] [KERNEL...]\n"
    "           JIT-compile into the disk cache (every kernel by default) for this GPU, or for\n"
    "           --arch with no GPU needed\n"
    "  status   warm every kernel (embedded and disk: deferred; the rest: JIT) and show where each came from\n"
    "  --help   show this text\n";

// Rows of cells printed with left-aligned columns, each as wide as its widest cell.
class Table {
 public:
  void row(std::vector<std::string> cells) { rows_.push_back(std::move(cells)); }
  void print(std::string_view indent) const {
    std::vector<std::size_t> widths;
    for (const auto& r : rows_) {
      widths.resize(std::max(widths.size(), r.size()));
      for (std::size_t i = 0; i < r.size(); ++i) widths[i] = std::max(widths[i], r[i].size());
    }
    for (const auto& r : rows_) {
      std::string line(indent);
      for (std::size_t i = 0; i < r.size(); ++i) {
        line += r[i];
        if (i + 1 < r.size()) line += std::string(widths[i] - r[i].size() + 2, ' ');
      }
      std::cout << line << '\n';
    }
  }

 private:
  std::vector<std::vector<std::string>> rows_;
};

std::string fixed1(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", value);
  return text;
}

std::string kib(std::size_t bytes) { return fixed1(static_cast<double>(bytes) / 1024.0) + " KiB"; }

// 1.0 GiB, 3.2 MiB, 45.0 KiB: for sizes that may be anything.
std::string human(std::uint64_t bytes) {
  constexpr const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes) / 1024.0;
  std::size_t u = 0;
  for (; value >= 1024.0 && u + 1 < std::size(units); ++u) value /= 1024.0;
  return fixed1(value) + " " + units[u];
}

std::string count(std::size_t n, std::string_view one, std::string_view many) {
  return std::to_string(n) + " " + std::string(n == 1 ? one : many);
}

// "145.2 KiB (836.1 KiB unpacked)": an image's or a unit's bytes as embedded (in its fatbin), and as loaded.
std::string packed(std::size_t stored, std::size_t size) { return kib(stored) + " (" + kib(size) + " unpacked)"; }

void list_catalog(const kiln::Catalog& catalog) {
  std::size_t stored = 0, size = 0;
  for (const auto& b : catalog.binaries) {
    stored += b.stored_size;
    size += b.size;
  }
  std::cout << "registry " << catalog.name << ": " << count(catalog.units.size(), "unit", "units") << ", "
            << count(catalog.kernels.size(), "kernel", "kernels") << ", "
            << count(catalog.binaries.size(), "binary", "binaries") << " in fatbins of " << kib(catalog.blobs_size)
            << "; images " << packed(stored, size) << "\n";
  for (std::size_t u = 0; u < catalog.units.size(); ++u) {
    const kiln::UnitEntry& unit = catalog.units[u];
    std::size_t unit_size = 0;
    for (const auto& b : catalog.binaries_of(unit)) unit_size += b.size;
    Table kernels;
    kernels.row({"kernel", "expression", "lowered"});
    for (const auto& k : catalog.kernels) {
      if (k.unit != u) continue;
      kernels.row({std::string(catalog.str(k.name)), std::string(catalog.str(k.expression)),
                   std::string(catalog.str(k.lowered))});
    }
    Table binaries;
    binaries.row({"binary", "embedded", "unpacked", "stored as"});
    for (const auto& b : catalog.binaries_of(unit)) {
      binaries.row({kiln::binary_label(b), kib(b.stored_size), kib(b.size),
                    b.compression == kiln::Compression::zstd ? "zstd" : "as is"});
    }
    std::cout << "\n  unit " << catalog.str(unit.name) << " (" << count(unit.binary_count, "binary", "binaries")
              << ", fatbins " << packed(unit.fatbins.size, unit_size) << ")\n";
    kernels.print("    ");
    binaries.print("    ");
  }
}

int list() {
  for (std::size_t i = 0; i < std::size(catalogs); ++i) {
    if (i) std::cout << '\n';
    list_catalog(catalogs[i]());
  }
  return 0;
}

// Prints the device line, or the reason there is none. Returns whether there is a device.
bool print_device(kiln::Registry& registry) {
  try {
    const kiln::DeviceInfo d = registry.device();
    std::cout << "device " << d.ordinal << ": " << d.name << ", sm_" << d.arch << ", driver "
              << d.driver_version / 1000 << "." << d.driver_version % 1000 / 10 << ", "
              << fixed1(static_cast<double>(d.total_memory) / (1024.0 * 1024.0 * 1024.0)) << " GiB\n";
    return true;
  } catch (const kiln::Error& e) {
    if (e.code() != kiln::Errc::no_driver && e.code() != kiln::Errc::no_device) throw;
    std::cout << e.what() << '\n';
    return false;
  }
}

void info_catalog(kiln::Registry& registry, bool has_device) {
  const kiln::Catalog& catalog = registry.catalog();
  std::cout << "\nregistry " << catalog.name << '\n';
  Table table;
  if (!has_device) {
    table.row({"kernel", "embedded"});
    for (const auto& k : catalog.kernels) {
      const std::string labels = kiln::embedded_labels(catalog, catalog.units[k.unit]);
      table.row({std::string(catalog.str(k.name)), labels.empty() ? "nothing embedded" : labels});
    }
  } else {
    table.row({"kernel", "tier", "binary"});
    for (const auto& k : catalog.kernels) {
      const std::string name(catalog.str(k.name));
      const kiln::Plan plan = registry.plan(name);
      if (!plan.available) {
        table.row({name, "-", plan.reason});
        continue;
      }
      const kiln::BinaryKind kind = plan.ptx ? kiln::BinaryKind::ptx : kiln::BinaryKind::cubin;
      table.row({name, std::string(kiln::to_string(plan.source)), kiln::binary_label(kind, plan.arch)});
    }
  }
  table.print("  ");
}

// The disk cache's location and state, one line.
void print_cache_line(const kiln::DiskCache& cache) {
  if (cache.usable()) {
    const std::uint64_t cap = cache.config().max_bytes;
    std::cout << "disk cache: " << cache.config().dir.string() << " (" << (cap ? "cap " + human(cap) : "no cap") << ")\n";
  } else {
    std::cout << "disk cache: off (" << cache.unusable_reason() << ")\n";
  }
}

// The remote cache's configuration (and with `ping`, whether it answers), then this process's counters.
void print_remote(kiln::RemoteCache& remote, bool ping) {
  if (!remote.usable()) {
    const std::string& why = remote.unusable_reason();
    std::cout << "remote cache: " << (why.starts_with("off") ? why : "not in use (" + why + ")") << "\n";
    return;
  }
  const kiln::RemoteSettings& s = remote.settings();
  const auto ttl = s.ttl.count();
  std::cout << "remote cache: " << remote.where() << " (fleet key " << remote.fleet_key_id() << ", entries expire after "
            << (ttl >= 3600 ? std::to_string(ttl / 3600) + " h" : std::to_string(ttl) + " s") << ", at most "
            << human(s.max_value_bytes) << " each)";
  if (ping) {
    std::string why;
    const auto ms = remote.ping_ms(why);
    std::cout << (ms ? ": answers in " + fixed1(*ms) + " ms, connecting included" : ": does not answer: " + why);
  }
  const kiln::RemoteStats r = remote.stats();
  std::cout << "\n  this process: " << r.hits << " hits, " << r.misses << " misses, " << r.rejected << " rejected, "
            << r.errors << " errors, " << r.skipped << " skipped calls, " << r.stores << " stored, " << r.refused
            << " refused, " << r.too_large << " too large; " << human(r.bytes_read) << " read, " << human(r.bytes_written)
            << " written; " << r.leases << " leases taken, " << r.lease_waits << " waits on other machines' ("
            << fixed1(r.lease_wait_ms) << " ms, " << r.lease_timeouts << " given up)\n";
}

bool is_sharing_command(std::string_view sub) { return sub == "export" || sub == "import" || sub == "push"; }

// kiln cache export [--registry R] [--arch sm_XX] FILE | import FILE | push [--registry R] [--arch sm_XX]
int sharing_command(std::string_view sub, int argc, char** argv) {
  kiln::EntryFilter filter;
  std::vector<std::string> files;
  for (int i = 3; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--registry" && i + 1 < argc && sub != "import") {
      filter.registry = argv[++i];
    } else if (a == "--arch" && i + 1 < argc && sub != "import") {
      const auto arch = kiln::detail::parse_arch(argv[++i]);
      if (!arch) {
        std::cerr << "kiln cache " << sub << ": " << arch.error() << "\n";
        return 2;
      }
      filter.arch = *arch;
    } else if (a.starts_with("--")) {
      std::cerr << usage;
      return 2;
    } else {
      files.emplace_back(a);
    }
  }
  if (files.size() != (sub == "push" ? 0u : 1u)) {
    std::cerr << usage;
    return 2;
  }
  kiln::DiskCache& cache = kiln::default_cache();
  print_cache_line(cache);
  std::string what = filter.registry.empty() ? "" : " of registry " + filter.registry;
  if (filter.arch) what += " for sm_" + std::to_string(filter.arch);
  if (sub == "export") {
    const kiln::PackReport r = kiln::export_pack(cache, files[0], filter);
    std::cout << "exported " << count(r.entries, "entry", "entries") << what << " to " << files[0] << " ("
              << human(r.bytes) << ")\n";
  } else if (sub == "import") {
    const kiln::PackReport r = kiln::import_pack(cache, files[0]);
    std::cout << "imported " << files[0] << ": " << count(r.entries, "entry", "entries") << " checked, " << r.added
              << " new\n";
  } else {
    kiln::RemoteCache& remote = kiln::default_remote();
    const kiln::PushReport r = kiln::push(cache, remote, filter);
    std::cout << "pushed " << count(r.pushed, "entry", "entries") << what << " to " << remote.where() << " ("
              << human(r.bytes) << "); " << r.skipped << " skipped\n";
  }
  return 0;
}

int cache_command(std::string_view sub, int argc, char** argv) {
  if (sub != "stats" && sub != "verify" && sub != "prune" && sub != "clear") {
    std::cerr << usage;
    return 2;
  }
  kiln::DiskCache& cache = kiln::default_cache();
  print_cache_line(cache);
  if (!cache.usable() && sub != "stats") return 1;
  if (sub == "stats") {
    const kiln::CacheStats s = cache.stats();
    std::cout << count(s.entries, "entry", "entries") << ", " << count(s.pch_files, "precompiled header", "precompiled headers")
              << ", " << human(s.bytes) << "\n";
    print_remote(kiln::default_remote(), true);
  } else if (sub == "verify") {
    const kiln::VerifyReport r = cache.verify();
    for (const auto& problem : r.problems) std::cout << "removed " << problem << '\n';
    std::cout << "checked " << count(r.checked, "file", "files") << ", removed " << r.removed << "\n";
  } else if (sub == "prune") {
    // The configured cap by default, where 0 means none (nothing to evict); an explicit 0 evicts everything.
    std::uint64_t cap = cache.config().max_bytes ? cache.config().max_bytes : UINT64_MAX;
    if (argc > 3) {
      const auto bytes = kiln::detail::parse_size(argv[3]);
      if (!bytes) {
        std::cerr << "kiln cache prune: " << bytes.error() << "\n";
        return 2;
      }
      cap = *bytes;
    }
    const kiln::PruneReport r = cache.prune(cap);
    std::cout << "evicted " << count(r.removed, "entry", "entries") << ", " << count(r.pch_removed, "precompiled header", "precompiled headers")
              << " and " << r.stray_removed
              << " stray files: " << human(r.bytes_before) << " -> " << human(r.bytes_after) << "\n";
  } else {
    std::cout << "removed " << count(cache.clear(), "entry", "entries") << " and every precompiled header\n";
  }
  return 0;
}

int info() {
  std::vector<std::unique_ptr<kiln::Registry>> registries;
  for (CatalogFn catalog : catalogs) registries.push_back(std::make_unique<kiln::Registry>(catalog()));
  // Informational: no driver or no GPU is an answer, not a failure.
  const bool has_device = print_device(*registries.front());
  print_cache_line(kiln::default_cache());
  print_remote(kiln::default_remote(), false);
  for (auto& registry : registries) info_catalog(*registry, has_device);
  return 0;
}

}  // namespace

// What a registry's precompile came to, for its summary line.
struct PrecompileTally {
  std::size_t compiled_and_cached = 0, already_cached = 0, not_cached = 0, failed = 0;
};

// One unit's line: what happened to it, and why when the cache does not hold it now.
std::string precompile_line(const kiln::PrecompileResult& r) {
  if (r.ok) return (r.compiled ? "compiled and cached  " : "already cached  ") + r.unit + "  " + fixed1(r.ms) + " ms";
  if (r.compiled) return "compiled, not cached  " + r.unit + "  " + fixed1(r.ms) + " ms: " + r.error;
  return "FAILED  " + r.unit;
}

int precompile_command(int argc, char** argv) {
  unsigned arch = 0, jobs = 0;
  std::vector<std::string> names;
  const auto refuse = [](std::string_view option, const std::string& why) {
    std::cerr << "kiln precompile: " << option << ": " << why << "\n";
    return 2;
  };
  for (int i = 2; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--arch" && i + 1 < argc) {
      const auto parsed = kiln::detail::parse_arch(argv[++i]);
      if (!parsed) return refuse("--arch", parsed.error());
      arch = *parsed;
    } else if (a == "--jobs" && i + 1 < argc) {
      const auto parsed = kiln::detail::parse_count(argv[++i], 1, kiln::detail::kMaxJitWorkers);
      if (!parsed) return refuse("--jobs", parsed.error());
      jobs = static_cast<unsigned>(*parsed);
    } else if (a.starts_with("--")) {
      std::cerr << usage;
      return 2;
    } else {
      names.emplace_back(a);
    }
  }
  // A name no registry has is a mistake to report, not a unit to skip.
  for (const auto& n : names) {
    if (std::any_of(std::begin(catalogs), std::end(catalogs), [&](CatalogFn c) { return c().find(n) != nullptr; })) continue;
    for (CatalogFn catalog_fn : catalogs) std::cerr << kiln::unknown_kernel_message(catalog_fn(), n) << '\n';
    return 2;
  }
  const bool terminal = ::isatty(STDOUT_FILENO);
  bool all_ok = true;
  for (CatalogFn catalog_fn : catalogs) {
    const kiln::Catalog& catalog = catalog_fn();
    std::vector<std::string> mine;  // the names that belong to this registry
    for (const auto& n : names)
      if (catalog.find(n)) mine.push_back(n);
    if (!names.empty() && mine.empty()) continue;
    unsigned target = arch;
    if (!target) {
      kiln::Registry registry(catalog);
      if (!print_device(registry)) {
        std::cerr << "kiln precompile: no GPU to compile for: pass --arch sm_XX\n";
        return 1;
      }
      target = registry.device().arch;
    }
    std::cout << "registry " << catalog.name << ": compiling for sm_" << target << '\n';
    PrecompileTally tally;
    kiln::precompile(catalog, target, mine, jobs, [&](const kiln::PrecompileResult& r, std::size_t done, std::size_t total) {
      if (r.ok) ++(r.compiled ? tally.compiled_and_cached : tally.already_cached);
      else ++(r.compiled ? tally.not_cached : tally.failed);
      if (terminal) {
        const std::size_t width = 30, filled = width * done / total;
        std::cout << "\r[" << std::string(filled, '#') << std::string(width - filled, ' ') << "] " << done << "/" << total
                  << " " << r.unit << "\033[K" << std::flush;
        if (!r.ok) std::cout << "\r" << precompile_line(r) << "\033[K\n";
        else if (done == total) std::cout << '\n';
      } else {
        std::cout << precompile_line(r) << '\n';
      }
      if (!r.ok && !r.compiled) std::cerr << r.error << '\n';
    });
    std::cout << "registry " << catalog.name << ", sm_" << target << ": " << tally.compiled_and_cached
              << " compiled and cached, " << tally.already_cached << " already cached, " << tally.not_cached
              << " compiled but not cached, " << tally.failed << " failed\n";
    all_ok = all_ok && tally.not_cached == 0 && tally.failed == 0;
  }
  return all_ok ? 0 : 1;
}

int status_command() {
  for (CatalogFn catalog_fn : catalogs) {
    kiln::Registry registry(catalog_fn());
    if (!print_device(registry)) return 0;
    registry.precompile_all();
    std::vector<std::string> all;
    for (const auto& k : registry.catalog().kernels) all.emplace_back(registry.catalog().str(k.name));
    registry.ensure_warm(all, std::chrono::minutes(10));
    const kiln::WarmupStatus s = registry.status();
    std::cout << "\nregistry " << registry.catalog().name << ": " << s.submitted << " submitted, " << s.compiled
              << " compiled, " << s.deferred << " deferred, " << s.pending << " pending, " << s.failed << " failed\n";
    Table table;
    table.row({"kernel", "state", "tier", "ms"});
    for (const auto& k : s.kernels)
      table.row({k.name, k.state, k.state == "loaded" ? std::string(kiln::to_string(k.tier)) : "-",
                 k.state == "loaded" ? fixed1(k.ms) : "-"});
    table.print("  ");
    for (const auto& k : s.kernels)
      if (!k.error.empty()) std::cerr << k.name << ": " << k.error << '\n';
  }
  std::cout << '\n';
  print_remote(kiln::default_remote(), false);
  return 0;
}

int main(int argc, char** argv) {
  const std::string_view command = argc >= 2 ? argv[1] : "";
  try {
    if (command == "list" && argc == 2) return list();
    if (command == "info" && argc == 2) return info();
    if (command == "cache" && argc >= 3 && is_sharing_command(argv[2])) return sharing_command(argv[2], argc, argv);
    if (command == "cache" && (argc == 3 || argc == 4)) return cache_command(argv[2], argc, argv);
    if (command == "precompile") return precompile_command(argc, argv);
    if (command == "status" && argc == 2) return status_command();
  } catch (const kiln::Error& e) {
    std::cerr << e.what() << '\n';
    return 1;
  }
  if (command == "--help" || command == "-h") {
    std::cout << usage;
    return 0;
  }
  std::cerr << usage;
  return 2;
}
