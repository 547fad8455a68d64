// The command line's entry point (kiln::cli_main): usage, dispatch, and the commands that report on the
// registries: list, info, status.
#include <kiln/cache.hpp>
#include <kiln/catalog.hpp>
#include <kiln/cli.hpp>
#include <kiln/kiln.hpp>
#include <kiln/remote.hpp>
#include <kiln/select.hpp>

#include "cli/commands.hpp"
#include "cli/devices.hpp"
#include "cli/output.hpp"

#include <algorithm>
#include <chrono>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

namespace kiln::cli {
namespace {

struct Command {
  std::string_view name;
  std::string_view usage;  // the arguments, after the name
  std::string_view what;   // one or more lines, indented by the caller
  int (*run)(const Invocation&);
  bool json;               // takes --json
};

constexpr Command commands[] = {
    {"list", "[--json]", "every registry's units, kernels and embedded binaries with their sizes", list, true},
    {"info", "[--json]",
     "this machine's GPUs, the disk cache per registry and architecture, and the tier and binary each kernel\n"
     "would load from on each GPU (with no GPU: what is embedded, and on disk for which architecture)", info, true},
    {"precompile", "[--arch sm_XX]... [--jobs N] [KERNEL...] | --record FILE --arch sm_XX... |\n"
                   "      --link FILE --arch sm_XX... [KERNEL...]",
     "JIT-compile into the disk cache (every kernel by default) for each visible GPU's architecture, or for\n"
     "each --arch with no GPU needed; with --record, what a run recorded (KILN_RECORD=FILE): its programs\n"
     "given at run time and the kernels no embedded binary served; with --link, the linked units of the\n"
     "kernels (every linked unit by default) built with FILE's code (an operator's translation unit), as a\n"
     "get() with it would, so a broken operator fails here; exits 1 unless every unit asked for is in the\n"
     "cache",
     precompile, false},
    {"why", "[--arch sm_XX]... KERNEL...",
     "what serves each kernel for this GPU or each --arch (an embedded cubin, the disk cache, the fleet's\n"
     "cache), or, for one that will be compiled, why nothing cached serves it: the nearest entry of its unit\n"
     "on disk and which fields of the key differ (the source digest, down to its translation unit, a header,\n"
     "its options or kernels; the architecture; a compiler version; the format)",
     why, false},
    {"status", "[--json]",
     "warm every kernel on every GPU (embedded and disk: deferred; the rest: JIT), and show\nwhere each came from",
     status, true},
    {"cache", "stats [--json] | list [--registry R] [--arch sm_XX] [--json] | show PACK [--json] | verify |\n"
              "      prune [BYTES] | clear | export [--registry R] [--arch sm_XX] FILE | import FILE |\n"
              "      push [--registry R] [--arch sm_XX]",
     "the disk cache: where it is, entries and bytes per registry and architecture (stats, with the remote\n"
     "cache); every entry with its unit, architecture, size, last use and the tier that made it (list); a\n"
     "pack checked whole, then what it holds (show; exits 1 for a pack that does not check out); check\n"
     "every entry and precompiled header and remove the bad ones (verify); evict least recently used\n"
     "entries down to BYTES (prune; 512M, 2G; default: the cap); remove everything (clear); write matching\n"
     "entries into one verified pack (export), check a whole pack then add its entries (import), upload\n"
     "matching entries to the remote cache, KILN_REMOTE_CACHE (push)",
     cache, true},
};

std::string indented(std::string_view text, std::string_view indent) {
  std::string out(indent);
  for (const char c : text) {
    out += c;
    if (c == '\n') out += indent;
  }
  return out;
}

std::string command_usage(const std::string& program, const Command& c) {
  return "usage: " + program + " " + std::string(c.name) + " " + std::string(c.usage) + "\n" +
         indented(c.what, "  ") + "\n";
}

std::string usage(const std::string& program, std::span<const Catalog* const> registries) {
  std::string text = "usage: " + program + " <command> [--help]\nregistries:";
  for (const Catalog* c : registries) text.append(" ").append(c->name);
  text += "\ncommands:\n";
  for (const Command& c : commands) {
    text.append("  ").append(c.name).append(" ").append(c.usage).append("\n");
    text.append(indented(c.what, "      ")).append("\n");
  }
  return text.append("  --help\n      this text; `").append(program).append(" COMMAND --help`: one command's\n");
}

std::uint64_t binary_bytes(const Catalog& catalog, const UnitEntry& unit) {
  std::uint64_t total = 0;
  for (const auto& b : catalog.binaries_of(unit)) total += b.size;
  return total;
}

// "145.2 KiB (836.1 KiB unpacked)": an image's or a unit's bytes as embedded (in its fatbin), and as loaded.
std::string packed(std::uint64_t stored, std::uint64_t size) { return kib(stored) + " (" + kib(size) + " unpacked)"; }

// The words `kiln list --json` gives a binary's kind and storage.
const char* kind_name(BinaryKind kind) {
  return kind == BinaryKind::ptx ? "ptx" : kind == BinaryKind::ltoir ? "ltoir" : "cubin";
}
const char* compression_name(Compression compression) {
  return compression == Compression::zstd ? "zstd" : compression == Compression::lto ? "lto" : "none";
}

// Returns whether a cell was abbreviated to fit a line.
bool list_catalog(const Catalog& catalog) {
  bool abbreviated = false;
  std::uint64_t stored = 0, size = 0;
  for (const auto& b : catalog.binaries) {
    stored += b.stored_size;
    size += b.size;
  }
  std::cout << "registry " << catalog.name << ": " << count(catalog.units.size(), "unit", "units") << ", "
            << count(catalog.kernels.size(), "kernel", "kernels") << ", "
            << count(catalog.binaries.size(), "binary", "binaries") << " in fatbins of " << kib(catalog.blobs_size)
            << "; images " << packed(stored, size) << "\n";
  for (std::size_t u = 0; u < catalog.units.size(); ++u) {
    const UnitEntry& unit = catalog.units[u];
    Table kernels;
    kernels.row({"kernel", "expression", "lowered"});
    for (const auto& k : catalog.kernels) {
      if (k.unit != u) continue;
      kernels.row({std::string(catalog.str(k.name)), std::string(catalog.str(k.expression)),
                   std::string(catalog.str(k.lowered))});
    }
    // A linked unit is built at run time with its operator: from its embedded LTO-IR, or its source.
    const std::string what = unit.binary_count ? count(unit.binary_count, "binary", "binaries") + ", fatbins " +
                                                     packed(unit.fatbins.size, binary_bytes(catalog, unit))
                                               : std::string(unit.linked ? "" : "JIT only: nothing embedded");
    std::cout << "\n  unit " << catalog.str(unit.name) << " ("
              << (unit.linked ? "linked: built at run time with its operator" + (what.empty() ? "" : "; " + what) : what)
              << ")\n";
    abbreviated = kernels.print("    ", kLineWidth) || abbreviated;
    if (unit.binary_count) {
      Table binaries;
      binaries.row({"binary", "embedded", "unpacked", "stored as"});
      for (const auto& b : catalog.binaries_of(unit)) {
        binaries.row({binary_label(b), kib(b.stored_size), kib(b.size),
                      b.compression == Compression::lto    ? "fatbinary's LTO-IR encoding"
                      : b.compression == Compression::none ? "as is"
                                                           : compression_name(b.compression)});
      }
      abbreviated = binaries.print("    ", kLineWidth) || abbreviated;
    }
  }
  return abbreviated;
}

void json_catalog(Json& j, const Catalog& catalog) {
  j.object().field("name", catalog.name).key("units").array();
  for (std::size_t u = 0; u < catalog.units.size(); ++u) {
    const UnitEntry& unit = catalog.units[u];
    j.object().field("name", catalog.str(unit.name)).field("bytes", binary_bytes(catalog, unit))
        .field("fatbin_bytes", static_cast<std::uint64_t>(unit.fatbins.size)).field("linked", unit.linked)
        .key("kernels").array();
    for (const auto& k : catalog.kernels) {
      if (k.unit != u) continue;
      j.object().field("name", catalog.str(k.name)).field("expression", catalog.str(k.expression))
          .field("lowered", catalog.str(k.lowered)).end();
    }
    j.end().key("binaries").array();
    for (const auto& b : catalog.binaries_of(unit))
      j.object().field("target", binary_label(b)).field("arch", b.arch).field("kind", kind_name(b.kind))
          .field("bytes", b.size).field("embedded_bytes", b.stored_size)
          .field("compression", compression_name(b.compression)).end();
    j.end().end();
  }
  j.end().end();
}

}  // namespace

int refuse(const Invocation& in, std::string_view command, std::string_view why) {
  std::cerr << in.program << " " << command << ": " << why << "\n";
  for (const Command& c : commands)
    if (c.name == command) std::cerr << command_usage(in.program, c);
  return 2;
}

bool all_known(const Invocation& in, const std::vector<std::string>& names) {
  for (const auto& n : names) {
    if (std::any_of(in.registries.begin(), in.registries.end(), [&](const Catalog* c) { return c->find(n) != nullptr; }))
      continue;
    for (const Catalog* c : in.registries) std::cerr << unknown_kernel_message(*c, n) << '\n';
    return false;
  }
  return true;
}

namespace {

void say_no_gpu(const Invocation& in, std::string_view why, std::string_view command, std::string_view what) {
  std::cerr << why << "\n" << in.program << " " << command << ": no GPU to " << what << ": pass --arch sm_XX\n";
}

}  // namespace

std::optional<unsigned> device_arch(const Invocation& in, const Catalog& catalog, std::string_view command,
                                    std::string_view what) {
  Registry registry(catalog);  // device 0's
  try {
    return registry.device().arch;
  } catch (const Error& e) {
    if (e.code() != Errc::no_driver && e.code() != Errc::no_device) throw;
    say_no_gpu(in, e.what(), command, what);
    return std::nullopt;
  }
}

std::optional<std::vector<DeviceInfo>> every_device(const Invocation& in, const Catalog& catalog, std::string_view command,
                                                    std::string_view what) {
  std::vector<std::unique_ptr<Registry>> registries;  // one per device
  registries.push_back(std::make_unique<Registry>(catalog));
  Devices devices = visible_devices(*registries.front(), [&](int d) -> Registry& {
    return *registries.emplace_back(std::make_unique<Registry>(catalog, d));
  });
  if (devices.list.empty()) {
    say_no_gpu(in, devices.why, command, what);
    return std::nullopt;
  }
  return std::move(devices.list);
}

int list(const Invocation& in) {
  if (!in.args.empty()) return refuse(in, "list", "unexpected argument '" + std::string(in.args[0]) + "'");
  if (in.json) {
    Json j;
    j.object().key("registries").array();
    for (const Catalog* c : in.registries) json_catalog(j, *c);
    std::cout << j.end().end().str();
    return 0;
  }
  bool abbreviated = false;
  for (std::size_t i = 0; i < in.registries.size(); ++i) {
    if (i) std::cout << '\n';
    abbreviated = list_catalog(*in.registries[i]) || abbreviated;
  }
  if (abbreviated)
    std::cout << "\n(long names are shortened around \"...\" to fit " << kLineWidth << " columns; `" << in.program
              << " list --json` has them whole)\n";
  return 0;
}

namespace {

// One registry per (device, catalog), made as they are asked for: [device][catalog].
class Registries {
 public:
  explicit Registries(std::span<const Catalog* const> catalogs) : catalogs_(catalogs) {}
  std::vector<std::unique_ptr<Registry>>& of(int device) {
    while (static_cast<int>(by_device_.size()) <= device) {
      std::vector<std::unique_ptr<Registry>> row;
      for (const Catalog* c : catalogs_) row.push_back(std::make_unique<Registry>(*c, static_cast<int>(by_device_.size())));
      by_device_.push_back(std::move(row));
    }
    return by_device_[device];
  }
  Devices devices() {
    return visible_devices(*of(0).front(), [this](int d) -> Registry& { return *of(d).front(); });
  }

 private:
  std::span<const Catalog* const> catalogs_;
  std::vector<std::vector<std::unique_ptr<Registry>>> by_device_;
};

// The device lines (or why there is none), then KILN_DEVICE_ARCH's override where it is set.
void print_devices(const Devices& devices) {
  if (devices.list.empty()) std::cout << devices.why << '\n';
  for (const DeviceInfo& d : devices.list) std::cout << device_line(d) << '\n';
  if (const std::string line = override_line(); !line.empty()) std::cout << line << '\n';
}

// "device": device 0 (null and no_device without one, as scripts read it), "devices": every visible one.
void json_devices(Json& j, const Devices& devices) {
  j.key("device");
  if (devices.list.empty()) j.null().field("no_device", devices.why);
  else json_device(j, devices.list.front());
  j.key("devices").array();
  for (const DeviceInfo& d : devices.list) json_device(j, d);
  j.end();
  if (const std::string line = override_line(); !line.empty()) j.field("device_arch_override", line);
}

}  // namespace

int info(const Invocation& in) {
  if (!in.args.empty()) return refuse(in, "info", "unexpected argument '" + std::string(in.args[0]) + "'");
  Registries registries(in.registries);
  // Informational: no driver or no GPU is an answer, not a failure.
  const Devices devices = registries.devices();
  DiskCache& cache = default_cache();
  RemoteCache& remote = default_remote();
  const detail::Inventory inventory = detail::take_inventory(cache);  // what is on disk, for which architecture
  Json j;
  if (in.json) {
    j.object();
    json_devices(j, devices);
    j.key("disk_cache").object().field("usable", cache.usable());
    if (cache.usable()) {
      j.field("dir", cache.config().dir.string()).field("max_bytes", cache.config().max_bytes);
      json_breakdown(j, inventory);
    } else {
      j.field("reason", cache.unusable_reason().message);
    }
    j.end().key("remote_cache").object().field("usable", remote.usable());
    if (remote.usable()) j.field("where", remote.where());
    else j.field("reason", remote.unusable_reason().message);
    j.end().key("registries").array();
  } else {
    print_devices(devices);
    print_cache_line(cache);
    print_breakdown(inventory, "  ");
    std::cout << "remote cache: " << (remote.usable() ? remote.where() : remote.unusable_reason().message) << "\n";
  }
  const int gpus = static_cast<int>(devices.list.size());
  for (std::size_t c = 0; c < in.registries.size(); ++c) {
    const Catalog& catalog = *in.registries[c];
    Table table;
    if (in.json) j.object().field("name", catalog.name).key("kernels").array();
    // No GPU: what is embedded and on disk. One GPU: a tier and a binary column; several: a column per
    // device saying both.
    std::vector<std::string> header{"kernel"};
    if (gpus == 0) header.insert(header.end(), {"embedded", "on disk"});
    if (gpus == 1) header.insert(header.end(), {"tier", "binary"});
    for (int d = 0; gpus > 1 && d < gpus; ++d) header.push_back("device " + std::to_string(d));
    table.row(header);
    for (const auto& k : catalog.kernels) {
      const std::string name(catalog.str(k.name));
      const std::string embedded = embedded_labels(catalog, catalog.units[k.unit]);
      const std::vector<unsigned> on_disk = archs_on_disk(inventory, catalog.name, catalog.str(catalog.units[k.unit].name));
      if (in.json) {
        j.object().field("name", name).field("unit", catalog.str(catalog.units[k.unit].name)).key("embedded").array();
        for (const auto& b : catalog.binaries_of(catalog.units[k.unit])) j.value(binary_label(b));
        j.end().key("on_disk").array();
        for (const unsigned arch : on_disk) j.value("sm_" + std::to_string(arch));
        j.end();
      }
      if (gpus == 0) {
        std::string disk;
        for (const unsigned arch : on_disk) disk += (disk.empty() ? "sm_" : " sm_") + std::to_string(arch);
        table.row({name, embedded.empty() ? "nothing embedded" : embedded, disk.empty() ? "-" : disk});
        if (in.json) j.end();
        continue;
      }
      std::vector<std::string> row{name};
      if (in.json) j.key("devices").array();
      for (int d = 0; d < gpus; ++d) {
        const LoadPlan plan = registries.of(d)[c]->plan(name);
        const std::string binary = binary_label(plan.ptx ? BinaryKind::ptx : BinaryKind::cubin, plan.arch);
        if (in.json) {
          j.object().field("ordinal", d).field("available", plan.available);
          if (plan.available) j.field("tier", to_string(plan.tier)).field("binary", binary);
          else j.field("reason", plan.reason.message);
          j.end();
        }
        if (gpus == 1) row.insert(row.end(), {plan.available ? std::string(to_string(plan.tier)) : "-",
                                              plan.available ? binary : plan.reason.message});
        else row.push_back(plan.available ? std::string(to_string(plan.tier)) + " " + binary : "- (" + plan.reason.message + ")");
      }
      if (in.json) {
        j.end();
        // Device 0's, where scripts read it.
        const LoadPlan plan = registries.of(0)[c]->plan(name);
        j.field("available", plan.available);
        if (plan.available) j.field("tier", to_string(plan.tier)).field("binary", binary_label(plan.ptx ? BinaryKind::ptx : BinaryKind::cubin, plan.arch));
        else j.field("reason", plan.reason.message);
        j.end();
      }
      table.row(row);
    }
    if (in.json) {
      j.end().end();
    } else {
      std::cout << "\nregistry " << catalog.name << '\n';
      table.print("  ");
    }
  }
  if (in.json) std::cout << j.end().end().str();
  return 0;
}

int status(const Invocation& in) {
  if (!in.args.empty()) return refuse(in, "status", "unexpected argument '" + std::string(in.args[0]) + "'");
  Registries registries(in.registries);
  const Devices devices = registries.devices();
  Json j;
  if (in.json) j.object(), json_devices(j, devices), j.key("registries").array();
  else print_devices(devices);
  if (devices.list.empty()) {
    // Nothing was warmed: not a success. The reason is printed above (or in the JSON's no_device).
    if (in.json) std::cout << j.end().end().str();
    std::cerr << in.program << " status: nothing was warmed: no GPU here; `" << in.program
              << " precompile --arch sm_XX` fills the disk cache without one\n";
    return 1;
  }
  const int gpus = static_cast<int>(devices.list.size());
  // Every device's registries are handed their kernels before any is waited for: the JIT pool compiles
  // each (unit, architecture) once for all of them (the disk cache's lock), every core busy.
  std::vector<std::vector<std::string>> all(in.registries.size());
  for (std::size_t c = 0; c < in.registries.size(); ++c) {
    const Catalog& catalog = *in.registries[c];
    for (const auto& k : catalog.kernels)
      if (!catalog.units[k.unit].linked) all[c].emplace_back(catalog.str(k.name));  // built with an operator only
    for (int d = 0; d < gpus; ++d) registries.of(d)[c]->precompile_all();
  }
  for (std::size_t c = 0; c < in.registries.size(); ++c) {
    const Catalog& catalog = *in.registries[c];
    std::vector<WarmupStatus> warm;
    for (int d = 0; d < gpus; ++d) {
      registries.of(d)[c]->ensure_warm(all[c], std::chrono::minutes(10));
      warm.push_back(registries.of(d)[c]->status());
    }
    if (in.json) {
      for (int d = 0; d < gpus; ++d) {
        const WarmupStatus& s = warm[d];
        j.object().field("name", catalog.name).field("device", d).field("submitted", s.submitted)
            .field("compiled", s.compiled).field("deferred", s.deferred).field("pending", s.pending)
            .field("failed", s.failed).key("kernels").array();
        for (const auto& k : s.kernels) {
          j.object().field("name", k.name).field("state", k.state);
          if (k.state == "loaded") j.field("tier", to_string(k.tier)).field("ms", k.ms);
          if (!k.error.empty()) j.field("error", k.error.message);
          j.end();
        }
        j.end().end();
      }
      continue;
    }
    for (int d = 0; d < gpus; ++d) {
      const WarmupStatus& s = warm[d];
      std::cout << (d == 0 ? "\n" : "") << "registry " << catalog.name
                << (gpus > 1 ? " on device " + std::to_string(d) : std::string()) << ": " << s.submitted
                << " submitted, " << s.compiled << " compiled, " << s.deferred << " deferred, " << s.pending
                << " pending, " << s.failed << " failed\n";
    }
    // One GPU: state, tier and ms columns; several: a column per device saying them.
    Table table;
    std::vector<std::string> header{"kernel"};
    if (gpus == 1) header.insert(header.end(), {"state", "tier", "ms"});
    for (int d = 0; gpus > 1 && d < gpus; ++d) header.push_back("device " + std::to_string(d));
    table.row(header);
    for (const auto& k : warm[0].kernels) {
      std::vector<std::string> row{k.name};
      for (int d = 0; d < gpus; ++d) {
        const auto same = std::find_if(warm[d].kernels.begin(), warm[d].kernels.end(),
                                       [&](const WarmupStatus::PerKernel& o) { return o.name == k.name; });
        if (same == warm[d].kernels.end()) {
          row.resize(row.size() + (gpus == 1 ? 3 : 1), "-");
          continue;
        }
        const bool loaded = same->state == "loaded";
        const std::string tier = loaded ? std::string(to_string(same->tier)) : "-", ms = loaded ? fixed1(same->ms) : "-";
        if (gpus == 1) row.insert(row.end(), {same->state, tier, ms});
        else row.push_back(loaded ? tier + " " + ms + " ms" : same->state);
      }
      table.row(row);
    }
    table.print("  ");
    for (int d = 0; d < gpus; ++d)
      for (const auto& k : warm[d].kernels)
        if (!k.error.empty())
          std::cerr << k.name << (gpus > 1 ? " on device " + std::to_string(d) : std::string()) << ": " << k.error.message << '\n';
  }
  if (in.json) {
    const RemoteStats r = default_remote().stats();
    j.end().key("remote").object().field("hits", r.hits).field("misses", r.misses).field("rejected", r.rejected)
        .field("errors", r.errors).field("stores", r.stores).end();
    std::cout << j.end().str();
    return 0;
  }
  std::cout << '\n';
  print_remote(default_remote(), false);
  return 0;
}

}  // namespace kiln::cli

namespace kiln {

int cli_main(int argc, char** argv, std::span<const Catalog* const> registries) {
  using namespace kiln::cli;
  Invocation in;
  const std::string_view argv0 = argc > 0 ? argv[0] : "kiln";
  in.program = std::string(argv0.substr(argv0.rfind('/') == std::string_view::npos ? 0 : argv0.rfind('/') + 1));
  in.registries = registries;
  const std::string_view name = argc >= 2 ? argv[1] : "";
  if (name == "--help" || name == "-h" || name == "help") {
    std::cout << usage(in.program, registries);
    return 0;
  }
  const Command* command = nullptr;
  for (const Command& c : commands)
    if (c.name == name) command = &c;
  if (!command) {
    if (!name.empty()) std::cerr << in.program << ": unknown command '" << name << "'\n";
    std::cerr << usage(in.program, registries);
    return 2;
  }
  std::set<std::string_view> seen;
  for (const Catalog* c : registries) {
    if (!seen.insert(c->name).second) {
      std::cerr << in.program << ": two registries are named '" << c->name << "'; registry names must differ\n";
      return 2;
    }
  }
  if (registries.empty()) {
    std::cerr << in.program << ": no registry was given to kiln::cli_main\n";
    return 2;
  }
  for (int i = 2; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--help" || a == "-h") {
      std::cout << command_usage(in.program, *command);
      return 0;
    }
    if (a == "--json" && command->json) in.json = true;
    else in.args.push_back(a);
  }
  try {
    return command->run(in);
  } catch (const Error& e) {
    std::cerr << e.what() << '\n';
    return 1;
  } catch (const std::exception& e) {  // std::bad_alloc, say: the command could not, and says so
    std::cerr << in.program << " " << name << ": " << e.what() << '\n';
    return 1;
  }
}

int cli_main(int argc, char** argv, std::initializer_list<const Catalog*> registries) {
  return cli_main(argc, argv, std::span<const Catalog* const>(registries.begin(), registries.size()));
}

}  // namespace kiln
