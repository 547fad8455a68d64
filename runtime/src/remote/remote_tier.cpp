// The remote tier's step in the chain: the fleet's entry, verified, written to the local disk cache, loaded.
#include "remote/remote_state.hpp"
#include "remote/remote_tier.hpp"

#include <kiln/select.hpp>

namespace kiln::detail {

RemoteCache* remote_of(const RegistryOptions& options) {
  if (!options.use_remote) return nullptr;
  return options.remote ? options.remote : &default_remote();
}

namespace {

// The remote cache to ask, or why none (quietly nothing when it is off, as it is by default).
Result<RemoteState*> remote_for(const UnitQuery& q) {
  RemoteCache* remote = remote_of(q.options);
  if (!remote) return fail("");
  RemoteState& s = remote_state(*remote);
  if (!s.usable()) return fail(s.where == "off" ? "" : "the remote cache is not in use (" + s.unusable.message + ")");
  return &s;
}

Result<Origin> probe_remote(const UnitQuery& q) {
  auto s = remote_for(q);
  if (!s) return fail(s.error());
  const CacheKey key = q.key();
  const auto there = guarded(**s, "EXISTS of an entry", [&] { return (*s)->store->contains(entry_key(**s, key)); });
  if (!there) return fail(there.error());
  if (*there) return Origin{Tier::remote, q.arch, false};  // a probe: verified when fetched
  return fail("the remote cache " + (*s)->where + " has no entry for it (key " + key.hex + ")");
}

Result<UnitImage> fetch_remote(const UnitQuery& q) {
  auto s = remote_for(q);
  if (!s) return fail(s.error());
  CacheKey key = q.key();
  auto got = fetch_entry(**s, key);
  if (!got) return fail(got.error());
  if (const Status matches = entry_serves_unit(q.catalog, q.unit_index(), got->entry); !matches) {
    ++(*s)->rejected;
    remember_rejected(**s, key);
    return fail("the remote cache " + (*s)->where + " has no usable entry for it (key " + key.hex + ": " + matches.error() + ")");
  }
  // On this machine's disk too: the next process here needs no network.
  if (q.cache().usable()) q.cache().store_file(key, got->file());
  UnitImage image;
  image.source = Tier::remote;
  image.arch = q.arch;
  image.take(std::move(got->entry));
  image.cache_key = std::move(key.hex);
  image.label = binary_label(BinaryKind::cubin, q.arch) + " from the remote cache " + (*s)->where +
                " (" + image.cache_key + ")";
  return image;
}

}  // namespace

TierStep remote_tier() { return TierStep{Tier::remote, probe_remote, fetch_remote, nullptr, nullptr, nullptr}; }

}  // namespace kiln::detail
