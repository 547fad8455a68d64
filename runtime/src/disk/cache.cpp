// DiskCache's entry path: load (validate, or delete as corrupt), store, and single-flight builds.
#include "disk/directory.hpp"
#include "disk/entry.hpp"
#include "disk/files.hpp"
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

// "examples/block_sum_f32 sm_90 (key f433f5d0f4ee29d0)": what a message is about, from the key text.
std::string describe(const CacheKey& key) {
  const auto field = [&](std::string_view name) {
    std::string prefix = "\n";  // appended, not "\n" + ...: g++ 12 then warns falsely (-Wrestrict)
    prefix += name;
    prefix += '=';
    const auto at = key.text.find(prefix);
    if (at == std::string::npos) return std::string("?");
    const auto begin = at + prefix.size();
    return key.text.substr(begin, key.text.find('\n', begin) - begin);
  };
  return field("registry") + "/" + field("unit") + " sm_" + std::to_string(key.arch) + " (key " + key.hex.substr(0, 16) + ")";
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
  s.warn("corrupt", "deleted corrupt cache entry " + path.string() + " of " + describe(key) + ": " + problem +
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

bool DiskCache::store(const CacheKey& key, const CacheEntry& entry) {
  if (!usable()) return false;
  const auto refuse = [&](std::string_view kind, const std::string& message) {
    ++state_->store_failures;
    state_->warn(kind, message);
    return false;
  };
  if (!valid_key(key)) return refuse("invalid", "not storing a cache entry under a malformed key '" + key.hex + "'");
  // An entry that load() would reject must not be written: every later process would rebuild it.
  if (const detail::Status checked = detail::check_entry(entry, key.arch); !checked)
    return refuse("invalid", "not storing cache entry for " + describe(key) + ": " + checked.error());
  std::string bytes;
  try {
    bytes = detail::encode_entry(key, entry);
  } catch (const std::exception& e) {
    return refuse("encode", "not storing cache entry for " + describe(key) + ": " + e.what());
  }
  // The directory again, as the constructor made it: deleted while in use, it is made again; made
  // unsafe, it is refused.
  if (const auto dir = detail::open_cache_dir(state_->config.dir); !dir)
    return refuse(kWriteWarning, write_problem(dir.error()));
  if (const detail::Status published = detail::publish_file(state_->entries, key.hex, bytes); !published)
    return refuse(kWriteWarning, write_problem(published.error()));
  ++state_->stores;
  const std::uint64_t cap = state_->config.max_bytes;
  if (stats().bytes > cap) prune(cap);
  return true;
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
