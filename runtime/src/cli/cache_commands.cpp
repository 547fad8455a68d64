// `cache stats | list | show | verify | prune | clear | export | import | push`: the disk cache, cache
// packs and the remote cache from the command line.
#include <kiln/kiln.hpp>

#include "base/parse.hpp"  // the one parser of sizes and architectures (shared with the variables)
#include "cli/commands.hpp"
#include "chain/key.hpp"        // key_field
#include "chain/key_parts.hpp"  // compiler_line
#include "cli/output.hpp"
#include "chain/unit_key.hpp"  // kProgramRegistry: programs given at run time, any program may have them
#include "remote/remote_state.hpp"  // who expires the remote's entries

#include <algorithm>
#include <ctime>
#include <iostream>
#include <map>
#include <string>
#include <tuple>

namespace kiln::cli {

void print_cache_line(const DiskCache& cache) {
  if (cache.usable()) {
    const std::uint64_t cap = cache.config().max_bytes;
    std::cout << "disk cache: " << cache.config().dir.string() << " (" << (cap ? "cap " + human(cap) : "no cap") << ")\n";
  } else {
    std::cout << "disk cache: off (" << cache.unusable_reason().message << ")\n";
  }
}

void print_remote(RemoteCache& remote, bool ping) {
  if (!remote.usable()) {
    const std::string& why = remote.unusable_reason().message;
    std::cout << "remote cache: " << (why.starts_with("off") ? why : "not in use (" + why + ")") << "\n";
    return;
  }
  const RemoteSettings& s = remote.settings();
  const auto ttl = s.ttl.count();
  const std::string after = "after " + (ttl >= 3600 ? std::to_string(ttl / 3600) + " h" : std::to_string(ttl) + " s");
  // An HTTP tree or a bucket keeps objects until its own rules remove them: kiln writes them with no expiry.
  constexpr std::string_view kServer = "as the server's own rules say (ttl_s does not apply: an S3 lifecycle rule, a cleanup job)";
  std::string expiry;
  switch (detail::remote_state(remote).expiry) {
    case detail::Expiry::ttl: expiry = "entries expire " + after; break;
    case detail::Expiry::server: expiry = "entries expire " + std::string(kServer); break;
    case detail::Expiry::ttl_then_server:
      expiry = "entries expire from Redis " + after + ", from the object store " + std::string(kServer);
      break;
  }
  std::cout << "remote cache: " << remote.where() << " (fleet key " << remote.fleet_key_id() << ", " << expiry
            << ", at most " << human(s.max_value_bytes) << " each)";
  if (ping) {
    const RemotePing answer = remote.ping();
    std::cout << (answer.ms ? ": answers in " + fixed1(*answer.ms) + " ms, connecting included"
                            : ": does not answer: " + answer.reason.message);
  }
  const RemoteStats r = remote.stats();
  std::cout << "\n  this process: " << r.hits << " hits, " << r.misses << " misses, " << r.rejected << " rejected, "
            << r.errors << " errors, " << r.skipped << " skipped calls, " << r.stores << " stored, " << r.refused
            << " refused, " << r.too_large << " too large; " << human(r.bytes_read) << " read, " << human(r.bytes_written)
            << " written; " << r.leases << " leases taken, " << r.lease_waits << " waits on other machines' ("
            << fixed1(r.lease_wait_ms) << " ms, " << r.lease_timeouts << " given up)\n";
}

namespace {

std::string sm(unsigned arch) { return "sm_" + std::to_string(arch); }

struct Bucket {
  std::uint64_t entries = 0, bytes = 0;
};

// Entries and bytes per (registry, architecture), in order.
std::map<std::pair<std::string, unsigned>, Bucket> buckets(const detail::Inventory& inventory) {
  std::map<std::pair<std::string, unsigned>, Bucket> out;
  for (const detail::ListedEntry& e : inventory.entries) {
    Bucket& b = out[{e.registry, e.key.arch}];
    ++b.entries;
    b.bytes += e.bytes;
  }
  return out;
}

}  // namespace

void print_breakdown(const detail::Inventory& inventory, std::string_view indent) {
  Table table;
  table.row({"registry", "arch", "entries", "size"});
  for (const auto& [where, b] : buckets(inventory))
    table.row({where.first, sm(where.second), std::to_string(b.entries), human(b.bytes)});
  if (inventory.pch_files)
    table.row({"(precompiled headers)", "-", std::to_string(inventory.pch_files), human(inventory.pch_bytes)});
  if (!inventory.entries.empty() || inventory.pch_files) table.print(indent);
  if (!inventory.unreadable.empty())
    std::cout << indent << count(inventory.unreadable.size(), "entry file does", "entry files do")
              << " not check out (`kiln cache verify` removes the bad ones)\n";
}

void json_breakdown(Json& j, const detail::Inventory& inventory) {
  j.key("by_registry_arch").array();
  for (const auto& [where, b] : buckets(inventory))
    j.object().field("registry", where.first).field("arch", where.second).field("entries", b.entries)
        .field("bytes", b.bytes).end();
  j.end().key("pch").object().field("files", inventory.pch_files).field("bytes", inventory.pch_bytes).end();
  j.key("unreadable").array();
  for (const auto& u : inventory.unreadable) j.value(u);
  j.end();
}

std::vector<unsigned> archs_on_disk(const detail::Inventory& inventory, std::string_view registry, std::string_view unit) {
  std::vector<unsigned> archs;
  for (const detail::ListedEntry& e : inventory.entries)
    if (e.registry == registry && e.unit == unit && (archs.empty() || archs.back() != e.key.arch)) archs.push_back(e.key.arch);
  std::sort(archs.begin(), archs.end());
  archs.erase(std::unique(archs.begin(), archs.end()), archs.end());
  return archs;
}

namespace {

int stats(const Invocation& in) {
  DiskCache& cache = default_cache();
  RemoteCache& remote = default_remote();
  if (!in.json) {
    print_cache_line(cache);
    const CacheStats s = cache.stats();
    std::cout << count(s.entries, "entry", "entries") << ", " << count(s.pch_files, "precompiled header", "precompiled headers")
              << ", " << human(s.bytes) << "\n";
    print_breakdown(detail::take_inventory(cache), "  ");
    print_remote(remote, true);
    return 0;
  }
  Json j;
  j.object().key("disk_cache").object().field("usable", cache.usable());
  if (cache.usable()) {
    const CacheStats s = cache.stats();
    j.field("dir", cache.config().dir.string()).field("max_bytes", cache.config().max_bytes).field("entries", s.entries)
        .field("pch_files", s.pch_files).field("bytes", s.bytes);
    json_breakdown(j, detail::take_inventory(cache));
  } else {
    j.field("reason", cache.unusable_reason().message);
  }
  j.end().key("remote_cache").object().field("usable", remote.usable());
  if (remote.usable()) {
    const RemotePing answer = remote.ping();
    j.field("where", remote.where()).field("fleet_key_id", remote.fleet_key_id()).key("ping_ms");
    if (answer.ms) j.value(*answer.ms);
    else j.null().field("unreachable", answer.reason.message);
  } else {
    j.field("reason", remote.unusable_reason().message);
  }
  std::cout << j.end().end().str();
  return 0;
}

// The tier that made an entry and with what: "jit", "ptx", "jit, with an operator".
std::string made_by(const CacheKey& key, const std::string& compiler) {
  CacheEntry entry;
  entry.compiler = compiler;
  return detail::made_by(entry) + (detail::key_field(key.text, "linked") != "?" ? ", with an operator" : "");
}

// The options of `cache list` and `cache export`/`push`: --registry R, --arch sm_XX (one each), and the
// other arguments, in order. Returns 2 (refused) or 0.
int filter_options(const Invocation& in, std::string_view sub, EntryFilter& filter, std::vector<std::string>& rest) {
  for (std::size_t i = 1; i < in.args.size(); ++i) {
    const std::string_view a = in.args[i];
    if (a == "--registry" && i + 1 < in.args.size() && sub != "import" && sub != "show") {
      if (!filter.registry.empty() && filter.registry != in.args[i + 1])
        return refuse(in, "cache", std::string(sub) + ": one --registry at a time");
      filter.registry = std::string(in.args[++i]);
    } else if (a == "--arch" && i + 1 < in.args.size() && sub != "import" && sub != "show") {
      const auto arch = detail::parse_arch(in.args[++i]);
      if (!arch) return refuse(in, "cache", std::string(sub) + ": " + arch.error());
      if (filter.arch != 0 && filter.arch != *arch)
        return refuse(in, "cache", std::string(sub) + ": one --arch at a time (sm_" + std::to_string(filter.arch) +
                                       " and sm_" + std::to_string(*arch) + " given)" +
                                       (sub == "list" ? "" : ": make one pack per architecture"));
      filter.arch = *arch;
    } else if (a.starts_with("--")) {
      return refuse(in, "cache", std::string(sub) + ": unknown option '" + std::string(a) + "'");
    } else {
      rest.emplace_back(a);
    }
  }
  return 0;
}

// Whether --registry names a registry: this program's, the programs' given at run time, or one of `also`
// (the registries a shared cache holds entries of, for `list`). Otherwise refused (exit 2) with the known
// ones: an empty list or pack would look like success.
int unknown_registry(const Invocation& in, std::string_view sub, const std::string& registry,
                     const std::vector<std::string>& also = {}) {
  if (registry.empty() || registry == detail::kProgramRegistry ||
      std::any_of(in.registries.begin(), in.registries.end(), [&](const Catalog* c) { return c->name == registry; }) ||
      std::find(also.begin(), also.end(), registry) != also.end())
    return 0;
  std::vector<std::string> known;
  for (const Catalog* c : in.registries) known.emplace_back(c->name);
  known.emplace_back(detail::kProgramRegistry);
  known.insert(known.end(), also.begin(), also.end());
  std::sort(known.begin(), known.end());
  known.erase(std::unique(known.begin(), known.end()), known.end());
  std::string names;
  for (const auto& k : known) names += (names.empty() ? "" : ", ") + k;
  return refuse(in, "cache", std::string(sub) + ": no registry '" + registry + "' (registries: " + names + ")");
}

// list [--registry R] [--arch sm_XX]: every entry, read whole and checked, one line each.
int list_entries(const Invocation& in) {
  EntryFilter filter;
  std::vector<std::string> rest;
  if (const int refused = filter_options(in, "list", filter, rest)) return refused;
  if (!rest.empty()) return refuse(in, "cache", "list: unexpected argument '" + rest[0] + "'");
  DiskCache& cache = default_cache();
  if (!cache.usable()) {
    std::cerr << in.program << " cache list: the disk cache is not in use: " << cache.unusable_reason().message << '\n';
    return 1;
  }
  const detail::Inventory inventory = detail::take_inventory(cache);
  std::vector<std::string> in_cache;  // another program's registries, in a cache it shares
  for (const detail::ListedEntry& e : inventory.entries) in_cache.push_back(e.registry);
  if (const int refused = unknown_registry(in, "list", filter.registry, in_cache)) return refused;
  const std::time_t now = std::time(nullptr);
  Json j;
  Table table;
  if (in.json) j.object().field("dir", cache.config().dir.string()).key("entries").array();
  else print_cache_line(cache), table.row({"registry", "unit", "arch", "size", "used", "made by", "compile", "key"});
  std::size_t shown = 0;
  for (const detail::ListedEntry& e : inventory.entries) {
    if (!filter.matches(e.key)) continue;
    ++shown;
    const auto entry = detail::read_listed(cache, e);
    const std::string by = entry ? made_by(e.key, entry->compiler) : "(damaged: " + entry.error() + ")";
    // How long its compile took, where the entry says (kiln records it since it kept the history).
    std::optional<double> compile_ms;
    if (entry) compile_ms = detail::recorded_compile_ms(*entry);
    if (!in.json) {
      table.row({e.registry, e.unit, sm(e.key.arch), human(e.bytes), ago(e.used, now) + " ago", by,
                 compile_ms ? std::to_string(static_cast<long long>(*compile_ms)) + " ms" : "-", e.key.hex.substr(0, 16)});
      continue;
    }
    j.object().field("registry", e.registry).field("unit", e.unit).field("arch", e.key.arch).field("key", e.key.hex)
        .field("bytes", e.bytes).field("used", static_cast<std::uint64_t>(std::max<std::time_t>(0, e.used)))
        .field("age_s", static_cast<std::uint64_t>(std::max<std::time_t>(0, now - e.used)));
    if (entry) j.field("made_by", detail::made_by(*entry)).field("compiler", detail::compiler_line(*entry));
    if (compile_ms) j.field("compile_ms", static_cast<std::uint64_t>(*compile_ms));
    else j.field("problem", entry.error());
    j.field("linked", detail::key_field(e.key.text, "linked") != "?");
    if (const std::string code = detail::key_field(e.key.text, "code"); code != "?") j.field("code", code);
    j.end();
  }
  if (in.json) {
    j.end();
    json_breakdown(j, inventory);
    std::cout << j.end().str();
    return 0;
  }
  if (shown) table.print("  ");
  std::string what = filter.registry.empty() ? "" : " of registry " + filter.registry;
  if (filter.arch) what += " for " + sm(filter.arch);
  std::cout << count(shown, "entry", "entries") << what << "\n";
  if (!inventory.unreadable.empty())
    std::cout << count(inventory.unreadable.size(), "entry file does", "entry files do")
              << " not check out (`" << in.program << " cache verify` removes the bad ones)\n";
  return 0;
}

// show PACK: the pack checked whole, then its manifest: what each entry is, its size, and what made it.
int show_pack(const Invocation& in) {
  EntryFilter unused;
  std::vector<std::string> files;
  if (const int refused = filter_options(in, "show", unused, files)) return refused;
  if (files.size() != 1) return refuse(in, "cache", "show: needs one PACK");
  PackContents pack;
  try {
    pack = inspect_pack(files[0]);
  } catch (const Error& e) {
    if (!in.json) throw;
    // A script reading --json gets JSON either way: what was refused and why, and a non-zero exit.
    std::cout << Json().object().field("pack", files[0]).field("error", std::string(e.what()))
                     .field("code", std::string(to_string(e.code()))).end().str();
    std::cerr << e.what() << '\n';
    return 1;
  }
  if (in.json) {
    Json j;
    j.object().field("pack", files[0]).field("bytes", pack.bytes).key("entries").array();
    for (const PackMember& m : pack.entries)
      j.object().field("registry", detail::key_field(m.key.text, "registry")).field("unit", detail::key_field(m.key.text, "unit"))
          .field("arch", m.key.arch).field("key", m.key.hex).field("bytes", m.bytes).field("compiler", m.compiler.substr(0, m.compiler.find('\n'))).end();
    std::cout << j.end().end().str();
    return 0;
  }
  std::cout << "pack " << files[0] << ": " << count(pack.entries.size(), "entry", "entries") << ", " << human(pack.bytes)
            << "; its digest and every entry check out\n";
  Table table;
  table.row({"registry", "unit", "arch", "size", "made by", "key"});
  for (const PackMember& m : pack.entries)
    table.row({detail::key_field(m.key.text, "registry"), detail::key_field(m.key.text, "unit"), sm(m.key.arch),
               human(m.bytes), made_by(m.key, m.compiler), m.key.hex.substr(0, 16)});
  if (!pack.entries.empty()) table.print("  ");
  return 0;
}

// What a maintenance command could not do, on stderr: exit 1 when there was any.
int failed(const Invocation& in, std::string_view sub, const std::vector<std::string>& failures) {
  for (const auto& f : failures) std::cerr << in.program << " cache " << sub << ": " << f << '\n';
  return failures.empty() ? 0 : 1;
}

int maintain(const Invocation& in, std::string_view sub) {
  DiskCache& cache = default_cache();
  print_cache_line(cache);
  if (!cache.usable()) return 1;
  if (sub == "verify") {
    const VerifyReport r = cache.verify();
    for (const auto& problem : r.problems)
      std::cout << (problem.find("(left in place") == std::string::npos ? "removed " : "") << problem << '\n';
    std::cout << "checked " << count(r.checked, "file", "files") << ", removed " << r.removed << "\n";
    return failed(in, sub, r.failures);
  } else if (sub == "prune") {
    // The configured cap by default, where 0 means none (nothing to evict); an explicit 0 evicts everything.
    std::uint64_t cap = cache.config().max_bytes ? cache.config().max_bytes : UINT64_MAX;
    if (in.args.size() > 1) {
      const auto bytes = detail::parse_size(in.args[1]);
      if (!bytes) return refuse(in, "cache", "prune: " + bytes.error());
      cap = *bytes;
    }
    const PruneReport r = cache.prune(cap);
    std::cout << "evicted " << count(r.removed, "entry", "entries") << ", "
              << count(r.pch_removed, "precompiled header", "precompiled headers") << " and " << r.stray_removed
              << " stray files: " << human(r.bytes_before) << " -> " << human(r.bytes_after) << "\n";
    return failed(in, sub, r.failures);
  }
  const ClearReport r = cache.clear();
  std::cout << "removed " << count(r.removed, "entry", "entries")
            << (r.failures.empty() ? " and every precompiled header\n" : "; some files could not be removed\n");
  return failed(in, sub, r.failures);
}

// export [--registry R] [--arch sm_XX] FILE | import FILE | push [--registry R] [--arch sm_XX]
int share(const Invocation& in, std::string_view sub) {
  EntryFilter filter;
  std::vector<std::string> files;
  if (const int refused = filter_options(in, sub, filter, files)) return refused;
  if (files.size() != (sub == "push" ? 0u : 1u))
    return refuse(in, "cache", std::string(sub) + (sub == "push" ? ": takes no file" : ": needs one FILE"));
  // A registry this program does not have is a mistake to report, as a kernel no registry has is (an empty
  // pack, or nothing pushed, would look like success). Programs given at run time are under a registry of
  // their own, which every program may have made entries of.
  if (const int refused = unknown_registry(in, sub, filter.registry)) return refused;
  DiskCache& cache = default_cache();
  print_cache_line(cache);
  std::string what = filter.registry.empty() ? "" : " of registry " + filter.registry;
  if (filter.arch) what += " for sm_" + std::to_string(filter.arch);
  if (sub == "export") {
    const PackReport r = export_pack(cache, files[0], filter);
    std::cout << "exported " << count(r.entries, "entry", "entries") << what << " to " << files[0] << " ("
              << human(r.bytes) << ")\n";
  } else if (sub == "import") {
    const PackReport r = import_pack(cache, files[0]);
    std::cout << "imported " << files[0] << ": " << count(r.entries, "entry", "entries") << " checked, " << r.added
              << " new\n";
  } else {
    RemoteCache& remote = default_remote();
    const PushReport r = push(cache, remote, filter);
    std::cout << "pushed " << count(r.pushed, "entry", "entries") << what << " to " << remote.where() << " ("
              << human(r.bytes) << "); " << r.skipped << " skipped"
              << (r.replaced ? ", " + std::to_string(r.replaced) + " replaced (what was there did not verify)" : "") << "\n";
  }
  return 0;
}

}  // namespace

int cache(const Invocation& in) {
  const std::string_view sub = in.args.empty() ? "" : in.args[0];
  if (in.json && sub != "stats" && sub != "list" && sub != "show")
    return refuse(in, "cache", "--json is for `cache stats`, `cache list` and `cache show`");
  if (sub == "stats" || sub == "verify" || sub == "clear") {
    if (in.args.size() > 1) return refuse(in, "cache", std::string(sub) + ": unexpected argument '" + std::string(in.args[1]) + "'");
    return sub == "stats" ? stats(in) : maintain(in, sub);
  }
  if (sub == "prune") {
    if (in.args.size() > 2) return refuse(in, "cache", "prune takes at most one BYTES");
    return maintain(in, sub);
  }
  if (sub == "export" || sub == "import" || sub == "push") return share(in, sub);
  if (sub == "list") return list_entries(in);
  if (sub == "show") return show_pack(in);
  return refuse(in, "cache", sub.empty() ? "which? stats, list, show, verify, prune, clear, export, import or push"
                                         : "unknown subcommand '" + std::string(sub) + "'");
}

}  // namespace kiln::cli
