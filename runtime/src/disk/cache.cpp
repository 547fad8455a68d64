// DiskCache's entry path: load (validate, or delete as corrupt), store, and single-flight builds.
#include "disk/directory.hpp"
#include "disk/entry.hpp"
#include "disk/files.hpp"
#include "disk/key.hpp"
#include "disk/lock.hpp"
#include "disk/cache_state.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <exception>

namespace kiln {

namespace {

// A key whose hex is not 64 lowercase hex digits did not come from CacheKey::from; using it as a file
// name could reach outside the cache directory.
bool valid_key(const CacheKey& key) {
  return key.hex.size() == 64 &&
         std::all_of(key.hex.begin(), key.hex.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// One warning kind for every write problem (read-only directory, full disk, quota): one cause, one warning.
constexpr std::string_view kWriteWarning = "write";
std::string write_problem(const std::string& why) {
  return "cannot write to the kiln cache (" + why + "); kernels still work, from the other tiers; "
         "later write failures are only counted in the cache stats";
}

// The validated entry, or nullopt; a bad file is deleted and counted. Misses are the caller's to count.
// Nothing is read from a directory that others could write to now (it was private when the cache was
// opened, but may have been replaced or chmod'ed since).
std::optional<CacheEntry> read_entry(detail::CacheState& s, const CacheKey& key) {
  if (const detail::Status safe = detail::cache_dir_still_private(s.config.dir); !safe) {
    s.warn("unsafe", "not loading from the kiln cache: " + safe.error() + " (kernels still work, from the other tiers)");
    return std::nullopt;
  }
  const auto path = s.path_of(detail::entry_file_name(key.hex));
  const detail::EntryFile file = detail::read_entry_file(path, detail::kMaxEntryFileBytes);
  std::string problem = file.problem;
  switch (file.status) {
    case detail::EntryFile::Status::missing: return std::nullopt;
    case detail::EntryFile::Status::unreadable:
      s.warn("read", "cannot read cache entry " + path.string() + " (" + problem + "); treating it as a miss");
      return std::nullopt;
    case detail::EntryFile::Status::ok: {
      auto decoded = detail::decode_entry(file.bytes, key);
      if (decoded) {
        detail::touch_mtime(path);
        ++s.hits;
        return std::move(decoded).value();
      }
      problem = decoded.error();
      break;
    }
    case detail::EntryFile::Status::bad: break;
  }
  ++s.corrupt;
  detail::remove_bad_entry(path, file);
  s.warn("corrupt", "deleted corrupt cache entry " + path.string() + " of " + detail::describe_key(key) + ": " + problem +
                        " (it will be rebuilt; later ones are only counted in the cache stats)");
  return std::nullopt;
}

}  // namespace

DiskCache::DiskCache(CacheConfig config) : state_(new State) {
  state_->config = std::move(config);
  if (!state_->config.enabled) {
    state_->unusable = "the disk cache is disabled (KILN_CACHE=off)";
    return;
  }
  auto entries = detail::open_cache_dir(state_->config.dir);
  if (entries) state_->entries = std::move(entries).value();
  else state_->unusable = entries.error();
  if (!state_->unusable.empty())
    state_->warn("unusable", "not using the kiln cache: " + state_->unusable + " (kernels still work, from the other tiers)");
}

DiskCache::~DiskCache() { delete state_; }

bool DiskCache::usable() const noexcept { return state_->unusable.empty(); }
const std::string& DiskCache::unusable_reason() const noexcept { return state_->unusable; }
const CacheConfig& DiskCache::config() const noexcept { return state_->config; }
std::vector<std::string> DiskCache::warnings() const { return state_->warnings.printed(); }

bool DiskCache::contains(const CacheKey& key) const {
  if (!usable() || !valid_key(key)) return false;
  struct stat st {};
  return ::lstat(state_->path_of(detail::entry_file_name(key.hex)).c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::optional<CacheEntry> DiskCache::load(const CacheKey& key) {
  std::optional<CacheEntry> entry;
  if (usable() && valid_key(key)) entry = read_entry(*state_, key);
  if (!entry) ++state_->misses;
  return entry;
}

namespace {

bool refuse_store(detail::CacheState& s, std::string_view kind, const std::string& message) {
  ++s.store_failures;
  s.warn(kind, message);
  return false;
}

// Writes an entry file that has been checked, then prunes to the cap: what store() and store_file() share.
bool publish_entry(DiskCache& cache, detail::CacheState& s, const CacheKey& key, std::string_view bytes) {
  // The directory again, as the constructor made it: deleted while in use, it is made again; made
  // unsafe, it is refused.
  if (const auto dir = detail::open_cache_dir(s.config.dir); !dir)
    return refuse_store(s, kWriteWarning, write_problem(dir.error()));
  if (const detail::Status published = detail::publish_file(s.entries, key.hex, bytes); !published)
    return refuse_store(s, kWriteWarning, write_problem(published.error()));
  ++s.stores;
  const std::uint64_t cap = s.config.max_bytes;
  if (cache.stats().bytes > cap) cache.prune(cap);
  return true;
}

}  // namespace

bool DiskCache::store(const CacheKey& key, const CacheEntry& entry) {
  if (!usable()) return false;
  if (!valid_key(key))
    return refuse_store(*state_, "invalid", "not storing a cache entry under a malformed key '" + key.hex + "'");
  // An entry that load() would reject must not be written: every later process would rebuild it.
  if (const detail::Status checked = detail::check_entry(entry, key.arch); !checked)
    return refuse_store(*state_, "invalid", "not storing cache entry for " + detail::describe_key(key) + ": " + checked.error());
  std::string bytes;
  try {
    bytes = detail::encode_entry(key, entry);
  } catch (const std::exception& e) {
    return refuse_store(*state_, "encode", "not storing cache entry for " + detail::describe_key(key) + ": " + e.what());
  }
  return publish_entry(*this, *state_, key, bytes);
}

bool DiskCache::store_file(const CacheKey& key, std::string_view file) {
  if (!usable()) return false;
  if (!valid_key(key))
    return refuse_store(*state_, "invalid", "not storing a cache entry under a malformed key '" + key.hex + "'");
  const auto regions = detail::split_entry(file);
  if (!regions || regions->key_text != key.text)
    return refuse_store(*state_, "invalid", "not storing cache entry file for " + detail::describe_key(key) + ": " +
                                                (regions ? std::string("its key text is another key's") : regions.error()));
  return publish_entry(*this, *state_, key, file);
}

CacheEntry DiskCache::get_or_build(const CacheKey& key, const std::function<CacheEntry()>& build) {
  if (auto entry = load(key)) return std::move(*entry);
  if (!usable() || !valid_key(key)) return build();
  // The lock file needs the directory, as store() does: made again if it was deleted while in use.
  const auto dir = detail::open_cache_dir(state_->config.dir);
  const auto lock = dir ? detail::FileLock::acquire(state_->path_of(detail::lock_file_name(key.hex)))
                        : detail::Result<detail::FileLock>(detail::fail(dir.error()));
  if (!lock) {
    state_->warn(kWriteWarning, write_problem(lock.error()));  // then build without the cross-process lock
  } else if (auto entry = read_entry(*state_, key)) {
    return std::move(*entry);  // built by whoever held the lock while we waited
  }
  CacheEntry built = build();
  store(key, built);
  return built;
}

}  // namespace kiln
