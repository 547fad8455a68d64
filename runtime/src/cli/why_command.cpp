// `why [--arch sm_XX] KERNEL...`: for each kernel, what serves it on that architecture (an embedded cubin,
// the disk cache, the fleet's cache) or, when it will be compiled, why nothing cached serves it: the
// nearest entry of its unit on disk and which fields of the key differ, down to the part of the source
// digest (its translation unit, a header, its options or kernels) where the entry recorded them.
#include <kiln/catalog.hpp>
#include <kiln/kiln.hpp>
#include <kiln/select.hpp>

#include "base/parse.hpp"
#include "chain/entry.hpp"  // entries_path
#include "chain/key.hpp"
#include "chain/key_parts.hpp"
#include "cli/commands.hpp"
#include "cli/output.hpp"
#include "disk/inventory.hpp"
#include "jit/compile_history.hpp"
#include "jit/request.hpp"     // unit_key_parts, unit_estimate_ms
#include "registry/query.hpp"  // make_chain: the chain a registry would walk

#include <algorithm>
#include <cctype>
#include <cmath>
#include <ctime>
#include <iostream>

namespace kiln::cli {
namespace {

// The key's fields after format, registry and unit (CacheKeyFields::text), in the order they are told.
constexpr std::string_view kFields[] = {"source", "arch", "nvrtc", "nvjitlink", "cccl", "linked", "code"};

std::vector<std::string_view> differing(const CacheKey& had, const CacheKey& wanted) {
  std::vector<std::string_view> fields;
  for (const std::string_view f : kFields)
    if (detail::key_field(had.text, f) != detail::key_field(wanted.text, f)) fields.push_back(f);
  return fields;
}

std::string spaced(std::string text) {
  std::replace(text.begin(), text.end(), '\n', ' ');
  return text.empty() ? "none" : text;
}

// What differs in the source digest: the parts the entry recorded against the unit's now, and the options
// (which every entry keeps, so an older kiln's too).
std::string source_difference(DiskCache& cache, const detail::ListedEntry& nearest, const Catalog& catalog,
                              std::uint32_t unit) {
  const auto entry = detail::read_listed(cache, nearest);
  if (!entry) return "the source digest (the entry does not check out: " + entry.error() + ")";
  const std::string options(catalog.str(catalog.units[unit].options));
  const std::string options_change =
      entry->options == options ? "" : "its options (then: " + spaced(entry->options) + "; now: " + spaced(options) + ")";
  const auto parts = detail::recorded_key_parts(*entry);
  if (!parts) {
    return "the source digest: " +
           (options_change.empty() ? std::string("its translation unit, a header or its kernels")
                                   : options_change + ", or also its translation unit, a header or its kernels") +
           " (made by an older kiln, which kept no digests of the parts)";
  }
  std::vector<std::string> changed = detail::changed_parts(*parts, detail::unit_key_parts(catalog, unit));
  for (auto& c : changed)
    if (c == "its options" && !options_change.empty()) c = options_change;
  if (changed.empty()) return "the source digest (each part it recorded is the same: a toolkit header it did not record?)";
  std::string text = "the source digest: ";
  for (std::size_t i = 0; i < changed.size(); ++i) text += (i ? ", " : "") + changed[i];
  return text;
}

std::string difference(std::string_view field, const CacheKey& had, const CacheKey& wanted) {
  const auto value = [](const CacheKey& k, std::string_view f) {
    const std::string v = detail::key_field(k.text, f);
    return v == "?" ? std::string("none") : v;
  };
  const std::string then = value(had, field), now = value(wanted, field);
  if (field == "arch") return "the architecture (" + then + ", not " + now + ")";
  if (field == "nvrtc") return "the NVRTC version (" + then + ", not " + now + ")";
  if (field == "nvjitlink") return "the nvJitLink version (" + then + ", not " + now + ")";
  if (field == "cccl") return "the CCCL version its headers are from (" + then + ", not " + now + ")";
  if (field == "linked") return then == "none" ? "the operator (none then)" : "an operator linked into it";
  if (field == "code")
    return then == "none" ? "the code it is built from (its own architecture's then; " + now + "'s embedded PTX now)"
                          : "the code it is built from (" + then + "'s embedded PTX then; " +
                                (now == "none" ? std::string("its own architecture's") : now) + " now)";
  return std::string(field);
}

// Entry files of other cache formats beside this kiln's (<root>/v<N>): "12 entries of cache format 1 in DIR".
std::vector<std::string> other_formats(const DiskCache& cache) {
  std::vector<std::string> notes;
  std::error_code ec;
  const std::string own = detail::entries_path(cache.config().dir).filename().string();
  for (const auto& d : std::filesystem::directory_iterator(cache.config().dir, ec)) {
    const std::string name = d.path().filename().string();
    if (name == own || name.size() < 2 || name[0] != 'v' || !std::all_of(name.begin() + 1, name.end(), ::isdigit)) continue;
    std::size_t n = 0;
    std::error_code inner;
    for (auto it = std::filesystem::directory_iterator(d.path(), inner); !inner && it != std::filesystem::directory_iterator() && n < 100000;
         it.increment(inner))
      n += it->path().extension() == ".kiln";
    if (n) notes.push_back(count(n, "entry", "entries") + " of cache format " + name.substr(1) + " in " + d.path().string() +
                           ", made by another kiln (this one reads format " + std::to_string(kCacheFormatVersion) + ")");
  }
  return notes;
}

// ", its compile took N ms" where the entry of `key` says so.
std::string compile_time(DiskCache& cache, const detail::Inventory& inventory, const CacheKey& key) {
  for (const detail::ListedEntry& e : inventory.entries) {
    if (e.key.hex != key.hex) continue;
    const auto entry = detail::read_listed(cache, e);
    const auto ms = entry ? detail::recorded_compile_ms(*entry) : std::nullopt;
    return ms ? ", its compile took " + std::to_string(static_cast<long long>(*ms)) + " ms" : "";
  }
  return "";
}

// What the JIT pool will expect a unit's compile to take, and where that comes from.
std::string expected_time(const DiskCache& cache, const Catalog& catalog, std::uint32_t unit) {
  const std::filesystem::path root = cache.usable() ? cache.config().dir : std::filesystem::path{};
  const bool measured = detail::compile_history(root).lookup(catalog.str(catalog.units[unit].digest)).has_value();
  return "expected to take " + std::to_string(std::llround(detail::unit_estimate_ms(catalog, unit, root))) +
         " ms on one thread, " + (measured ? "as its last compile took" : "a guess from its size");
}

}  // namespace

int why(const Invocation& in) {
  std::vector<unsigned> archs;
  std::vector<std::string> names;
  for (std::size_t i = 0; i < in.args.size(); ++i) {
    const std::string_view a = in.args[i];
    if (a == "--arch") {
      if (i + 1 == in.args.size()) return refuse(in, "why", "--arch needs a value");
      const auto parsed = detail::parse_arch(in.args[++i]);
      if (!parsed) return refuse(in, "why", "--arch: " + parsed.error());
      if (std::find(archs.begin(), archs.end(), *parsed) == archs.end()) archs.push_back(*parsed);
    } else if (a.starts_with("-")) {
      return refuse(in, "why", "unknown option '" + std::string(a) + "'");
    } else {
      names.emplace_back(a);
    }
  }
  if (names.empty()) return refuse(in, "why", "which kernel? name one or more");
  if (!all_known(in, names)) return 2;
  if (archs.empty()) {
    const std::optional<unsigned> arch = device_arch(in, *in.registries.front(), "why", "ask for");
    if (!arch) return 1;
    archs.push_back(*arch);
  }
  DiskCache& cache = default_cache();
  RemoteCache& remote = default_remote();
  RegistryOptions options;  // a registry's own: every tier, the process's caches
  options.cache = &cache;
  options.remote = &remote;
  const detail::Inventory inventory = detail::take_inventory(cache);
  bool answered = true;
  for (const std::string& name : names) {
    for (const Catalog* catalog : in.registries) {
      const KernelEntry* kernel = catalog->find(name);
      if (!kernel) continue;
      const detail::TierChain chain = detail::make_chain(*catalog, options);
      const UnitEntry& unit = catalog->units[kernel->unit];
      const std::string unit_name(catalog->str(unit.name));
      for (const unsigned arch : archs) {
        std::cout << name << " (unit " << catalog->name << "/" << unit_name << ") for sm_" << arch << ": ";
        if (unit.linked) {
          std::cout << "not answered: " << linked_unit_message(*catalog, *kernel) << "\n";
          answered = false;
          continue;
        }
        // The tiers as get() asks them: the first that answers serves it, under the key it looks up.
        const detail::Explanation why = chain.explain(*kernel, arch);
        if (!why.available) {
          std::cout << "nothing serves it: " << why.reason << "\n";
          answered = false;
          continue;
        }
        const CacheKey& key = why.key;
        if (why.origin.source == Tier::embedded) {
          std::cout << "the embedded " << binary_label(BinaryKind::cubin, why.origin.arch) << " cubin serves it; nothing is compiled\n";
          continue;
        }
        if (why.origin.source == Tier::disk) {
          std::cout << "the disk cache serves it (entry " << key.hex.substr(0, 16) << compile_time(cache, inventory, key)
                    << "); nothing is compiled\n";
          continue;
        }
        if (why.origin.source == Tier::remote) {
          std::cout << "the fleet's cache (" << remote.where() << ") serves it (entry " << key.hex.substr(0, 16)
                    << "); nothing is compiled\n";
          continue;
        }
        std::cout << (why.origin.ptx ? "its embedded " + binary_label(BinaryKind::ptx, why.origin.arch) + " will be assembled"
                                     : "it will be compiled (" + expected_time(cache, *catalog, kernel->unit) + ")")
                  << "; nothing cached has its key (" << key.hex.substr(0, 16) << ")\n";
        if (!cache.usable()) std::cout << "  the disk cache is not in use: " << cache.unusable_reason().message << "\n";
        if (remote.usable())
          std::cout << "  the fleet's cache (" << remote.where()
                    << ") has no entry under its key either (it is asked by key: its nearest cannot be listed)\n";
        // The nearest entry of the unit on disk: the fewest fields differing, then the most recently used.
        const detail::ListedEntry* nearest = nullptr;
        std::size_t nearest_fields = 0, others = 0;
        for (const detail::ListedEntry& e : inventory.entries) {
          if (e.registry != catalog->name || e.unit != unit_name) continue;
          ++others;
          const std::size_t n = differing(e.key, key).size();
          if (!nearest || n < nearest_fields || (n == nearest_fields && e.used > nearest->used)) nearest = &e, nearest_fields = n;
        }
        if (!nearest) {
          if (cache.usable())
            std::cout << "  no entry of " << catalog->name << "/" << unit_name << " is on disk, for any architecture or compiler\n";
        } else {
          std::cout << "  the nearest on disk, " << nearest->key.hex.substr(0, 16) << " (sm_" << nearest->key.arch
                    << ", last used " << ago(nearest->used, std::time(nullptr)) << " ago), differs in:\n";
          for (const std::string_view f : differing(nearest->key, key))
            std::cout << "    " << (f == "source" ? source_difference(cache, *nearest, *catalog, kernel->unit)
                                                  : difference(f, nearest->key, key))
                      << "\n";
          if (others > 1) std::cout << "  " << count(others - 1, "other entry", "other entries") << " of the unit on disk\n";
        }
        if (cache.usable())
          for (const std::string& note : other_formats(cache)) std::cout << "  " << note << "\n";
      }
    }
  }
  return answered ? 0 : 1;
}

}  // namespace kiln::cli
