// `cache stats | verify | prune | clear | export | import | push`: the disk cache, cache packs and the
// remote cache from the command line.
#include <kiln/kiln.hpp>

#include "base/parse.hpp"  // the one parser of sizes and architectures (shared with the variables)
#include "cli/commands.hpp"
#include "cli/output.hpp"
#include "program/record.hpp"  // kProgramRegistry: programs given at run time, any program may have them

#include <algorithm>
#include <iostream>
#include <string>

namespace kiln::cli {

void print_cache_line(const DiskCache& cache) {
  if (cache.usable()) {
    const std::uint64_t cap = cache.config().max_bytes;
    std::cout << "disk cache: " << cache.config().dir.string() << " (" << (cap ? "cap " + human(cap) : "no cap") << ")\n";
  } else {
    std::cout << "disk cache: off (" << cache.unusable_reason() << ")\n";
  }
}

void print_remote(RemoteCache& remote, bool ping) {
  if (!remote.usable()) {
    const std::string& why = remote.unusable_reason();
    std::cout << "remote cache: " << (why.starts_with("off") ? why : "not in use (" + why + ")") << "\n";
    return;
  }
  const RemoteSettings& s = remote.settings();
  const auto ttl = s.ttl.count();
  std::cout << "remote cache: " << remote.where() << " (fleet key " << remote.fleet_key_id() << ", entries expire after "
            << (ttl >= 3600 ? std::to_string(ttl / 3600) + " h" : std::to_string(ttl) + " s") << ", at most "
            << human(s.max_value_bytes) << " each)";
  if (ping) {
    std::string why;
    const auto ms = remote.ping_ms(why);
    std::cout << (ms ? ": answers in " + fixed1(*ms) + " ms, connecting included" : ": does not answer: " + why);
  }
  const RemoteStats r = remote.stats();
  std::cout << "\n  this process: " << r.hits << " hits, " << r.misses << " misses, " << r.rejected << " rejected, "
            << r.errors << " errors, " << r.skipped << " skipped calls, " << r.stores << " stored, " << r.refused
            << " refused, " << r.too_large << " too large; " << human(r.bytes_read) << " read, " << human(r.bytes_written)
            << " written; " << r.leases << " leases taken, " << r.lease_waits << " waits on other machines' ("
            << fixed1(r.lease_wait_ms) << " ms, " << r.lease_timeouts << " given up)\n";
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
    print_remote(remote, true);
    return 0;
  }
  Json j;
  j.object().key("disk_cache").object().field("usable", cache.usable());
  if (cache.usable()) {
    const CacheStats s = cache.stats();
    j.field("dir", cache.config().dir.string()).field("max_bytes", cache.config().max_bytes).field("entries", s.entries)
        .field("pch_files", s.pch_files).field("bytes", s.bytes);
  } else {
    j.field("reason", cache.unusable_reason());
  }
  j.end().key("remote_cache").object().field("usable", remote.usable());
  if (remote.usable()) {
    std::string why;
    const auto ms = remote.ping_ms(why);
    j.field("where", remote.where()).field("fleet_key_id", remote.fleet_key_id()).key("ping_ms");
    if (ms) j.value(*ms);
    else j.null().field("unreachable", why);
  } else {
    j.field("reason", remote.unusable_reason());
  }
  std::cout << j.end().end().str();
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
  std::vector<std::string> failures;
  const std::uint64_t removed = cache.clear(&failures);
  std::cout << "removed " << count(removed, "entry", "entries")
            << (failures.empty() ? " and every precompiled header\n" : "; some files could not be removed\n");
  return failed(in, sub, failures);
}

// export [--registry R] [--arch sm_XX] FILE | import FILE | push [--registry R] [--arch sm_XX]
int share(const Invocation& in, std::string_view sub) {
  EntryFilter filter;
  std::vector<std::string> files;
  for (std::size_t i = 1; i < in.args.size(); ++i) {
    const std::string_view a = in.args[i];
    if (a == "--registry" && i + 1 < in.args.size() && sub != "import") {
      if (!filter.registry.empty() && filter.registry != in.args[i + 1])
        return refuse(in, "cache", std::string(sub) + ": one --registry at a time");
      filter.registry = std::string(in.args[++i]);
    } else if (a == "--arch" && i + 1 < in.args.size() && sub != "import") {
      const auto arch = detail::parse_arch(in.args[++i]);
      if (!arch) return refuse(in, "cache", std::string(sub) + ": " + arch.error());
      if (filter.arch != 0 && filter.arch != *arch)
        return refuse(in, "cache", std::string(sub) + ": one --arch at a time (sm_" + std::to_string(filter.arch) +
                                       " and sm_" + std::to_string(*arch) + " given): make one pack per architecture");
      filter.arch = *arch;
    } else if (a.starts_with("--")) {
      return refuse(in, "cache", std::string(sub) + ": unknown option '" + std::string(a) + "'");
    } else {
      files.emplace_back(a);
    }
  }
  if (files.size() != (sub == "push" ? 0u : 1u))
    return refuse(in, "cache", std::string(sub) + (sub == "push" ? ": takes no file" : ": needs one FILE"));
  // A registry this program does not have is a mistake to report, as a kernel no registry has is (an empty
  // pack, or nothing pushed, would look like success). Programs given at run time are under a registry of
  // their own, which every program may have made entries of.
  if (!filter.registry.empty() && filter.registry != detail::kProgramRegistry &&
      std::none_of(in.registries.begin(), in.registries.end(), [&](const Catalog* c) { return c->name == filter.registry; })) {
    std::string known;
    for (const Catalog* c : in.registries) known += (known.empty() ? "" : ", ") + std::string(c->name);
    known += (known.empty() ? "" : ", ") + std::string(detail::kProgramRegistry);
    return refuse(in, "cache", std::string(sub) + ": no registry '" + filter.registry + "' (registries: " + known + ")");
  }
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
              << human(r.bytes) << "); " << r.skipped << " skipped\n";
  }
  return 0;
}

}  // namespace

int cache(const Invocation& in) {
  const std::string_view sub = in.args.empty() ? "" : in.args[0];
  if (in.json && sub != "stats") return refuse(in, "cache", "--json is for `cache stats`");
  if (sub == "stats" || sub == "verify" || sub == "clear") {
    if (in.args.size() > 1) return refuse(in, "cache", std::string(sub) + ": unexpected argument '" + std::string(in.args[1]) + "'");
    return sub == "stats" ? stats(in) : maintain(in, sub);
  }
  if (sub == "prune") {
    if (in.args.size() > 2) return refuse(in, "cache", "prune takes at most one BYTES");
    return maintain(in, sub);
  }
  if (sub == "export" || sub == "import" || sub == "push") return share(in, sub);
  return refuse(in, "cache", sub.empty() ? "which? stats, verify, prune, clear, export, import or push"
                                         : "unknown subcommand '" + std::string(sub) + "'");
}

}  // namespace kiln::cli
