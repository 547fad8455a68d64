// DiskCache's entry path: load (validate, or delete as corrupt), store, and single-flight builds.
#include "disk/cache_internal.hpp"
#include "disk/cache_state.hpp"
#include "chain/entry.hpp"
#include "disk/files.hpp"
#include "chain/key.hpp"
#include "disk/lock.hpp"

#include <kiln/error.hpp>

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <exception>

namespace kiln {

namespace detail {

Result<std::optional<PrivateDir>> CacheState::open(bool create) const {
  {
    std::lock_guard lock(dir_mutex_);
    if (dir_) {
      // Still private, not deleted, and still what the configured path names (not renamed away, nor
      // swapped for a symlink): two stats instead of a walk from "/".
      struct stat st, named;
      if (::fstat(dir_->fd.get(), &st) == 0 && vet_private_dir(st, dir_->path, "").ok() &&
          ::fstatat(AT_FDCWD, entries.c_str(), &named, AT_SYMLINK_NOFOLLOW) == 0 && named.st_dev == st.st_dev &&
          named.st_ino == st.st_ino) {
        const int fd = ::fcntl(dir_->fd.get(), F_DUPFD_CLOEXEC, 0);
        if (fd >= 0) return std::optional<PrivateDir>(PrivateDir{UniqueFd(fd), dir_->path});
      }
      dir_.reset();  // deleted, chmod'ed, moved or no descriptor left: walk again, and say why if refused
    }
  }
  auto opened = open_cache_dir(config.dir, create);
  if (opened && *opened) {
    const int fd = ::fcntl((*opened)->fd.get(), F_DUPFD_CLOEXEC, 0);
    std::lock_guard lock(dir_mutex_);
    if (fd >= 0) dir_ = PrivateDir{UniqueFd(fd), (*opened)->path};
  }
  return opened;
}

// maintenance.cpp: eviction down to `cap`, never of the entry named `keep`.
PruneReport prune_to(CacheState& s, std::uint64_t cap, const std::string& keep);
}  // namespace detail

namespace {

using detail::CacheState;
using detail::describe_key;

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

std::string not_in_use(const CacheState& s) { return "the disk cache is not in use (" + s.unusable.message + ")"; }

// The validated entry, or why there is none: absent, unreadable, refused (not the user's own file),
// corrupt, or foreign (it fails `check`); a bad file is deleted (when kiln may) and counted. Misses are
// the caller's to count. Everything is opened relative to the version directory, opened now under the
// private rule: nothing is read from a directory others could write (it was private when the cache was
// opened, but may have been replaced or chmod'ed since).
detail::Result<CacheEntry> read_entry(CacheState& s, const CacheKey& key, const detail::EntryCheck& check,
                                      bool count_hit = true) {
  const auto dir = s.open(false);
  if (!dir) {
    s.warn("unsafe", "not loading from the kiln cache: " + dir.error() + " (kernels still work, from the other tiers)");
    return detail::fail("refused: " + dir.error());
  }
  if (!*dir) return detail::fail("absent: the cache directory is gone");
  const int fd = (*dir)->fd.get();
  const std::string name = detail::entry_file_name(key.hex);
  const auto path = s.entries / name;
  const detail::EntryFile file = detail::read_entry_file(fd, name, path);
  std::string problem = file.problem;
  bool foreign = false;  // a valid entry, but not for what asked
  switch (file.status) {
    case detail::EntryFile::Status::missing: return detail::fail("absent");
    case detail::EntryFile::Status::unreadable:
      s.warn("read", "cannot read cache entry " + path.string() + " (" + problem + "); treating it as a miss");
      return detail::fail("unreadable: " + problem);
    case detail::EntryFile::Status::refused:
      s.warn("refused", "not loading cache entry of " + describe_key(key) + ": " + problem +
                            " (it is rebuilt and replaced; kernels still work)");
      return detail::fail("refused: " + problem);
    case detail::EntryFile::Status::ok: {
      auto decoded = detail::decode_entry(file.bytes, key);
      const detail::Status fits = decoded && check ? check(*decoded) : detail::ok();
      if (decoded && fits) {
        detail::touch_mtime(fd, name);
        if (count_hit) ++s.hits;
        return std::move(decoded).value();
      }
      problem = decoded ? "not this unit's entry: " + fits.error() : decoded.error();
      if (decoded) foreign = true;
      break;
    }
    case detail::EntryFile::Status::bad: break;
  }
  ++s.corrupt;
  if (detail::remove_bad_entry(fd, name, file)) {
    s.warn("corrupt", "deleted corrupt cache entry " + path.string() + " of " + describe_key(key) + ": " + problem +
                          " (it will be rebuilt; later ones are only counted in the cache stats)");
  } else if (file.opened && S_ISDIR(file.st.st_mode)) {
    s.warn("in the way", path.string() + " is " + problem + ": left in place, since kiln deletes no directory it did "
                         "not make; move it away so that kiln can cache " + describe_key(key));
  } else {
    s.warn("corrupt", "corrupt cache entry " + path.string() + " of " + describe_key(key) + ": " + problem +
                          " (not deleted: it changed meanwhile, or the directory is read-only; treated as a miss)");
  }
  return detail::fail((foreign ? "foreign: " : "corrupt: ") + problem);
}

}  // namespace

namespace detail {

namespace {

// Why nothing can be read under `key` at all, before any file is looked at.
Status readable(const CacheState& s, const CacheKey& key) {
  if (!s.unusable.empty()) return fail(not_in_use(s));
  if (!valid_key(key)) return fail("a malformed key '" + key.hex + "'");
  return ok();
}

}  // namespace

Result<CacheEntry> load_checked(DiskCache& cache, const CacheKey& key, const EntryCheck& check) {
  CacheState& s = CacheAccess::of(cache);
  const Status usable = readable(s, key);
  Result<CacheEntry> entry = usable ? read_entry(s, key, check) : Result<CacheEntry>(fail(usable.error()));
  if (!entry) ++s.misses;
  return entry;
}

Result<CacheEntry> read_ahead_checked(DiskCache& cache, const CacheKey& key, const EntryCheck& check) {
  CacheState& s = CacheAccess::of(cache);
  if (const Status usable = readable(s, key); !usable) return fail(usable.error());
  return read_entry(s, key, check, false);
}

void count_hit(DiskCache& cache) { ++CacheAccess::of(cache).hits; }

namespace {

Status refuse_store(CacheState& s, std::string_view kind, const std::string& message, const std::string& why) {
  ++s.store_failures;
  s.warn(kind, message);
  return fail(why);
}

// Publishes an entry file already checked for `key`, then prunes to the cap (never evicting it): what
// store_entry and DiskCache::store_file share.
Status publish_entry(CacheState& s, const CacheKey& key, std::string_view bytes) {
  const std::uint64_t cap = s.config.max_bytes;
  if (cap != 0 && bytes.size() > cap) {
    const std::string why = "the entry (" + std::to_string(bytes.size()) + " bytes) is larger than the cache's cap of " +
                            std::to_string(cap) + " bytes (KILN_CACHE_MAX_BYTES; 0 means no cap)";
    return refuse_store(s, "cap", "not storing cache entries larger than the cap: " + why, why);
  }
  // The directory again, as the constructor made it: deleted while in use, it is made again; made
  // unsafe, it is refused.
  const auto dir = s.open(true);
  if (!dir) return refuse_store(s, kWriteWarning, write_problem(dir.error()), dir.error());
  if (const Status published = publish_file((*dir)->fd.get(), s.entries, key.hex, bytes); !published)
    return refuse_store(s, kWriteWarning, write_problem(published.error()), published.error());
  ++s.stores;
  if (cap != 0) prune_to(s, cap, entry_file_name(key.hex));
  return ok();
}

Status check_key(CacheState& s, const CacheKey& key) {
  if (valid_key(key)) return ok();
  const std::string why = "a malformed key '" + key.hex + "'";
  return refuse_store(s, "invalid", "not storing a cache entry under " + why, why);
}

}  // namespace

Status store_entry(DiskCache& cache, const CacheKey& key, const CacheEntry& entry) {
  CacheState& s = CacheAccess::of(cache);
  if (!s.unusable.empty()) return fail(not_in_use(s));
  if (Status valid = check_key(s, key); !valid) return valid;
  // An entry that load() would reject must not be written: every later process would rebuild it.
  if (const Status checked = check_entry(entry, key.arch); !checked)
    return refuse_store(s, "invalid", "not storing cache entry for " + describe_key(key) + ": " + checked.error(),
                        checked.error());
  std::string bytes;
  try {
    bytes = encode_entry(key, entry);
  } catch (const std::exception& e) {
    return refuse_store(s, "encode", "not storing cache entry for " + describe_key(key) + ": " + e.what(), e.what());
  }
  return publish_entry(s, key, bytes);
}

namespace {

// The disk cache's hold on a key: its lock file (or none, when it could not be had: the unit is built and
// stored anyway), held while this process builds the key.
class DiskHold final : public StoreHold {
 public:
  DiskHold(DiskCache& cache, CacheKey key, std::optional<FileLock> lock)
      : cache_(cache), key_(std::move(key)), lock_(std::move(lock)) {}
  Status publish(const CacheEntry& entry) override {
    Status stored = store_entry(cache_, key_, entry);
    lock_.reset();
    return stored;
  }

 private:
  DiskCache& cache_;
  const CacheKey key_;
  std::optional<FileLock> lock_;
};

// The disk cache as a store a build goes through: the entry, or the key's lock file after a second look
// (whoever held the lock may have stored it meanwhile).
class DiskStore final : public UnitStore {
 public:
  explicit DiskStore(DiskCache& cache) : cache_(cache) {}
  Tier tier() const noexcept override { return Tier::disk; }

  Claim claim(const CacheKey& key, const EntryCheck& check) override {
    CacheState& s = CacheAccess::of(cache_);
    Claim claim;
    if (auto entry = load_checked(cache_, key, check)) {
      claim.found = std::move(entry).value();
      return claim;
    }
    if (!s.unusable.empty() || !valid_key(key)) {
      claim.held = fail(s.unusable.empty() ? "a malformed key '" + key.hex + "'" : not_in_use(s));
      return claim;
    }
    // The lock file needs the directory, as store() does: made again if it was deleted while in use.
    const auto dir = s.open(true);
    const std::string name = lock_file_name(key.hex);
    FileLock::Refused refused{FileLock::Refusal::cannot_lock, dir ? std::string() : dir.error()};
    std::optional<FileLock> lock =
        dir ? FileLock::acquire((*dir)->fd.get(), name, (s.entries / name).string(),
                                std::chrono::duration_cast<std::chrono::milliseconds>(s.config.lock_timeout), refused)
            : std::nullopt;
    // Without the lock, it is built anyway: one warning saying why.
    if (!lock && refused.why == FileLock::Refusal::cannot_lock) {
      s.warn(kWriteWarning, write_problem(refused.message));
    } else if (!lock) {
      s.warn("lock", "building " + describe_key(key) + " without waiting any longer for another process building it: " +
                         refused.message + "; if that process is stuck, end it (kernels still work)");
    } else if (auto entry = read_entry(s, key, check)) {
      claim.found = std::move(entry).value();  // built by whoever held the lock while this process waited
      return claim;
    }
    claim.hold = std::make_unique<DiskHold>(cache_, key, std::move(lock));
    return claim;
  }

 private:
  DiskCache& cache_;
};

}  // namespace

std::unique_ptr<UnitStore> disk_store(DiskCache& cache) { return std::make_unique<DiskStore>(cache); }

}  // namespace detail

DiskCache::DiskCache(CacheConfig config) : state_(new State) {
  state_->config = std::move(config);
  state_->entries = detail::entries_path(state_->config.dir);
  if (!state_->config.enabled) {
    state_->unusable = {Errc::cache, "the disk cache is disabled (KILN_CACHE=off)"};
    return;
  }
  if (const auto dir = state_->open(true); !dir) state_->unusable = {Errc::cache, dir.error()};
  if (!state_->unusable.empty())
    state_->warn("unusable", "not using the kiln cache: " + state_->unusable.message + " (kernels still work, from the other tiers)");
}

DiskCache::~DiskCache() { delete state_; }

bool DiskCache::usable() const noexcept { return state_->unusable.empty(); }
const Reason& DiskCache::unusable_reason() const noexcept { return state_->unusable; }
const CacheConfig& DiskCache::config() const noexcept { return state_->config; }
std::vector<std::string> DiskCache::warnings() const { return state_->warnings.printed(); }

bool DiskCache::contains(const CacheKey& key) const {
  if (!usable() || !valid_key(key)) return false;
  const auto dir = state_->open(false);
  if (!dir || !*dir) return false;
  struct stat st {};
  return ::fstatat((*dir)->fd.get(), detail::entry_file_name(key.hex).c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
         S_ISREG(st.st_mode);
}

CacheLookup DiskCache::lookup(const CacheKey& key) {
  auto entry = detail::load_checked(*this, key, {});
  if (!entry) return {std::nullopt, Reason{Errc::cache, entry.error()}};
  return {std::move(entry).value(), {}};
}

std::optional<CacheEntry> DiskCache::load(const CacheKey& key) { return lookup(key).entry; }

bool DiskCache::store(const CacheKey& key, const CacheEntry& entry) { return detail::store_entry(*this, key, entry).ok(); }

bool DiskCache::store_file(const CacheKey& key, std::string_view file) {
  detail::CacheState& s = *state_;
  if (!usable() || !detail::check_key(s, key)) return false;
  // Written byte for byte, so it must be what load() accepts: the whole entry, for this key.
  if (const auto decoded = detail::decode_entry(file, key); !decoded)
    return detail::refuse_store(s, "invalid", "not storing cache entry file for " + detail::describe_key(key) + ": " +
                                                  decoded.error(), decoded.error()).ok();
  return detail::publish_entry(s, key, file).ok();
}

CacheEntry DiskCache::get_or_build(const CacheKey& key, const std::function<CacheEntry()>& build) {
  detail::Claim claim = detail::disk_store(*this)->claim(key, {});
  if (claim.found) return std::move(*claim.found);
  CacheEntry built = build();  // a throw releases the lock, storing nothing
  if (claim.hold) (void)claim.hold->publish(built);
  return built;
}

}  // namespace kiln
