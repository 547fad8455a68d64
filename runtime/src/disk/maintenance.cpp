// Whole-directory operations of DiskCache: stats, prune (LRU by mtime), verify, every entry in turn, clear.
// They cover the precompiled headers the JIT pool keeps beside the entries (<family>.pch and its .sum,
// jit/pch_store.hpp) as well: counted in the bytes, evicted by age like entries, checked, cleared.
#include "disk/cache_state.hpp"
#include "chain/entry.hpp"
#include "disk/files.hpp"
#include "chain/key.hpp"
#include "disk/lock.hpp"
#include "base/summed_file.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <unordered_map>

namespace kiln {

namespace {

using detail::CacheState;

// A temp file this old is abandoned even if a process with its writer's pid exists (pid reuse, or a
// writer on another machine sharing the directory): no entry takes an hour to write.
constexpr std::time_t kAbandonedTempSeconds = 3600;

using detail::ScannedFile;

std::vector<ScannedFile> scan(int dir) { return detail::scan_cache_dir(dir); }

// The version directory now, for a whole-directory operation: nothing when gone or refused (what the
// constructor and every load warn about).
std::optional<detail::PrivateDir> open_for_scan(const CacheState& s) {
  auto dir = s.open(false);
  if (!dir || !*dir) return std::nullopt;
  return std::move(**dir);
}

bool is_entry_file(const ScannedFile& f) { return f.kind == detail::CacheFileKind::entry && S_ISREG(f.st.st_mode); }
bool is_pch_file(const ScannedFile& f) { return f.kind == detail::CacheFileKind::pch && S_ISREG(f.st.st_mode); }
bool is_sum_file(const ScannedFile& f) { return f.kind == detail::CacheFileKind::pch_sum && S_ISREG(f.st.st_mode); }

// Which files a cap counts: entries, PCH files and their sums.
bool counts_toward_cap(const ScannedFile& f) { return is_entry_file(f) || is_pch_file(f) || is_sum_file(f); }

std::string pch_sum_name(const std::string& pch) { return pch + ".sum"; }

// Deletes a PCH file, then its sum (a reader between the two finds a sum without its file: a miss).
bool remove_pch(int dir, const std::string& pch) {
  errno = 0;
  const bool removed = detail::remove_cache_file(dir, pch);
  const int err = errno;
  detail::remove_cache_file(dir, pch_sum_name(pch));
  errno = err;  // what the PCH file's deletion said (remove_or_note)
  return removed;
}

bool exists_at(int dir, const std::string& name) {
  struct stat st {};
  return ::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
}

// Why the directory `dir` (shown as `shown`) cannot be changed, or empty: a read-only file system, a
// permission. Asked before deleting, so that a command that can delete nothing says so.
std::string unwritable(int dir, const std::filesystem::path& shown) {
  if (::faccessat(dir, ".", W_OK, AT_EACCESS) == 0) return {};
  return shown.string() + ": cannot delete files in it: " + std::strerror(errno);
}

// Calls `remove` (a deletion that returns false when it deleted nothing) with errno cleared; where the
// deletion itself failed (not where the file was gone, a directory, or replaced), adds why to `failures`.
template <typename F>
bool remove_or_note(F&& remove, const std::filesystem::path& shown, std::vector<std::string>* failures) {
  errno = 0;
  if (remove()) return true;
  const int err = errno;
  if (failures != nullptr && err != 0 && err != ENOENT) failures->push_back(shown.string() + ": not removed: " + std::strerror(err));
  return false;
}

bool process_alive(pid_t pid) { return ::kill(pid, 0) == 0 || errno == EPERM; }

// Lock files nobody holds (their holder was killed before deleting them), temp files of dead or
// long-gone writers, PCH files without a sum and sums long without their PCH file. Locks are taken before
// deletion, so a lock in use is never pulled from its holder. Directories at such names are a user's:
// never removed.
std::uint64_t remove_strays(int dir, const std::vector<ScannedFile>& files, bool every_temp) {
  std::uint64_t removed = 0;
  const std::time_t now = std::time(nullptr);
  for (const ScannedFile& f : files) {
    if (f.kind == detail::CacheFileKind::lock) {
      removed += detail::FileLock::try_acquire(dir, f.name).has_value();  // its destructor deletes the file
    } else if (f.kind == detail::CacheFileKind::temp &&
               (every_temp || !process_alive(f.writer) || now - f.st.st_mtime > kAbandonedTempSeconds)) {
      removed += detail::remove_cache_file(dir, f.name);
    } else if (is_pch_file(f) && !exists_at(dir, pch_sum_name(f.name))) {
      // A sum is published before its file, so a file without one was left by a deletion cut short.
      removed += detail::remove_cache_file(dir, f.name);
    } else if (is_sum_file(f) && (every_temp || now - f.st.st_mtime > kAbandonedTempSeconds) &&
               !exists_at(dir, std::string(f.name, 0, f.name.size() - 4))) {
      // Young, it may be a sum whose file is being renamed into place.
      removed += detail::remove_cache_file(dir, f.name);
    }
  }
  return removed;
}

// The key of an entry file that is a valid entry for the key its name claims; if not, why it must go.
detail::Result<CacheKey> check_entry_file(int dir, const std::string& name, const std::filesystem::path& shown,
                                          std::string_view stem, detail::EntryFile& file) {
  using detail::fail;
  file = detail::read_entry_file(dir, name, shown);
  if (file.status != detail::EntryFile::Status::ok) return fail(file.problem);
  const auto regions = detail::split_entry(file.bytes);
  if (!regions) return fail(regions.error());
  auto key = detail::key_from_text(regions->key_text);
  if (!key) return fail("key text names no architecture");
  if (key->hex != stem) return fail("file name is not the SHA-256 of the entry's key text");
  if (const auto decoded = detail::decode_entry(file.bytes, *key); !decoded) return fail(decoded.error());
  return std::move(*key);
}

}  // namespace

namespace detail {

// Evicts least recently used entries until the entries hold at most `cap` bytes; never `keep` (the entry
// a store just published: most recently used, but entries dated in the future would otherwise outrank it).
PruneReport prune_to(CacheState& s, std::uint64_t cap, const std::string& keep) {
  PruneReport r;
  const auto dir = open_for_scan(s);
  if (!dir) return r;
  const int fd = dir->fd.get();
  auto files = scan(fd);
  r.stray_removed = remove_strays(fd, files, false);
  std::erase_if(files, [](const ScannedFile& f) { return !counts_toward_cap(f); });
  for (const ScannedFile& f : files) r.bytes_before += static_cast<std::uint64_t>(f.st.st_size);
  // A PCH file and its sum go together: the sum's bytes are its file's, and evicted with it.
  std::unordered_map<std::string, std::uint64_t> sum_bytes;
  for (const ScannedFile& f : files) {
    if (is_sum_file(f)) sum_bytes[std::string(f.name, 0, f.name.size() - 4)] = static_cast<std::uint64_t>(f.st.st_size);
  }
  std::erase_if(files, is_sum_file);
  // PCH files go first, oldest first: an entry is never evicted to make room for a PCH, which only saves
  // time (a PCH that does not fit beside the entries is not kept). Then entries: load() sets the mtime of
  // every hit, so the oldest mtime is the least recently used entry.
  std::sort(files.begin(), files.end(), [](const ScannedFile& a, const ScannedFile& b) {
    if (is_pch_file(a) != is_pch_file(b)) return is_pch_file(a);
    if (a.st.st_mtim.tv_sec != b.st.st_mtim.tv_sec) return a.st.st_mtim.tv_sec < b.st.st_mtim.tv_sec;
    if (a.st.st_mtim.tv_nsec != b.st.st_mtim.tv_nsec) return a.st.st_mtim.tv_nsec < b.st.st_mtim.tv_nsec;
    return a.name < b.name;
  });
  r.bytes_after = r.bytes_before;
  if (r.bytes_after > cap) {
    if (std::string why = unwritable(fd, s.entries); !why.empty()) {
      r.failures.push_back(std::move(why));
      return r;
    }
  }
  for (const ScannedFile& f : files) {
    if (r.bytes_after <= cap) break;
    if (f.name == keep) continue;
    if (is_pch_file(f)) {
      const std::size_t noted = r.failures.size();
      remove_or_note([&] { return remove_pch(fd, f.name); }, s.entries / f.name, &r.failures);
      if (r.failures.size() != noted) continue;  // still there: it still counts
      const auto sum = sum_bytes.find(f.name);
      r.bytes_after -= static_cast<std::uint64_t>(f.st.st_size) + (sum == sum_bytes.end() ? 0 : sum->second);
      ++r.pch_removed;
      continue;
    }
    // ENOENT: another process evicted it first; either way it no longer counts.
    if (::unlinkat(fd, f.name.c_str(), 0) != 0 && errno != ENOENT) {
      r.failures.push_back((s.entries / f.name).string() + ": not evicted: " + std::strerror(errno));
      continue;
    }
    r.bytes_after -= static_cast<std::uint64_t>(f.st.st_size);
    ++r.removed;
  }
  s.evictions += r.removed;
  return r;
}

}  // namespace detail

CacheStats DiskCache::stats() const {
  CacheStats s;
  if (usable()) {
    if (const auto dir = open_for_scan(*state_)) {
      for (const ScannedFile& f : scan(dir->fd.get())) {
        if (!counts_toward_cap(f)) continue;
        s.entries += is_entry_file(f);
        s.pch_files += is_pch_file(f);
        s.bytes += static_cast<std::uint64_t>(f.st.st_size);
      }
    }
  }
  s.hits = state_->hits;
  s.misses = state_->misses;
  s.corrupt = state_->corrupt;
  s.stores = state_->stores;
  s.store_failures = state_->store_failures;
  s.evictions = state_->evictions;
  return s;
}

PruneReport DiskCache::prune(std::uint64_t max_bytes) {
  if (!usable()) return {};
  return detail::prune_to(*state_, max_bytes, {});
}

VerifyReport DiskCache::verify() {
  VerifyReport r;
  if (!usable()) return r;
  const auto dir = open_for_scan(*state_);
  if (!dir) return r;
  const int fd = dir->fd.get();
  const auto files = scan(fd);
  remove_strays(fd, files, false);
  const std::string cannot_delete = unwritable(fd, state_->entries);
  for (const ScannedFile& f : files) {
    // Every file kiln writes is 0600 (the directory 0700): one others may read or write is not as kiln left it.
    if ((f.st.st_mode & 077) != 0 && !S_ISLNK(f.st.st_mode)) {
      char mode[8];
      std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(f.st.st_mode & 07777));
      r.failures.push_back((state_->entries / f.name).string() + ": mode " + mode +
                           ": others may read or write it (kiln's files are 0600)");
    }
    if (is_pch_file(f)) {
      // Missing (evicted or a stray removed above): nothing to check.
      const detail::Status good = detail::verify_summed(state_->entries / f.name);
      if (!good && good.error().empty()) continue;
      ++r.checked;
      if (!good) {
        ++r.removed;
        r.problems.push_back(good.error());
      }
      continue;
    }
    if (f.kind != detail::CacheFileKind::entry) continue;
    const auto path = state_->entries / f.name;
    detail::EntryFile file;
    const auto checked = check_entry_file(fd, f.name, path, detail::classify_cache_file(f.name).stem, file);
    if (file.status == detail::EntryFile::Status::missing) continue;  // evicted meanwhile
    ++r.checked;
    if (checked || file.status == detail::EntryFile::Status::unreadable) continue;
    if (file.status != detail::EntryFile::Status::refused &&
        remove_or_note([&] { return detail::remove_bad_entry(fd, f.name, file); }, path, &r.failures)) {
      ++r.removed;
      r.problems.push_back(path.string() + ": " + checked.error());
    } else if (file.status != detail::EntryFile::Status::refused && !cannot_delete.empty()) {
      r.problems.push_back(path.string() + ": " + checked.error() + " (left in place: " + cannot_delete + ")");
    } else {
      r.problems.push_back(path.string() + ": " + checked.error() + " (left in place: " +
                           (file.opened && S_ISDIR(file.st.st_mode) ? "kiln deletes no directory it did not make)"
                                                                     : "not kiln's to delete, or it changed meanwhile)"));
    }
  }
  return r;
}

void DiskCache::for_each_entry(const std::function<void(const CacheKey& key, std::string_view file)>& visit) {
  if (!usable()) return;
  const auto dir = open_for_scan(*state_);
  if (!dir) return;
  const int fd = dir->fd.get();
  auto files = scan(fd);
  std::erase_if(files, [](const ScannedFile& f) { return f.kind != detail::CacheFileKind::entry; });
  std::sort(files.begin(), files.end(), [](const ScannedFile& a, const ScannedFile& b) { return a.name < b.name; });
  for (const ScannedFile& f : files) {
    detail::EntryFile file;
    const auto key = check_entry_file(fd, f.name, state_->entries / f.name, detail::classify_cache_file(f.name).stem, file);
    if (key) visit(*key, file.bytes);
  }
}

ClearReport DiskCache::clear() {
  ClearReport report;
  if (!usable()) return report;
  const auto dir = open_for_scan(*state_);
  if (!dir) return report;
  const int fd = dir->fd.get();
  const auto files = scan(fd);
  if (files.empty()) return report;
  if (std::string why = unwritable(fd, state_->entries); !why.empty()) {
    report.failures.push_back(std::move(why));
    return report;
  }
  remove_strays(fd, files, true);
  for (const ScannedFile& f : files) {
    const auto shown = state_->entries / f.name;
    if (f.kind == detail::CacheFileKind::entry &&
        remove_or_note([&] { return detail::remove_cache_file(fd, f.name); }, shown, &report.failures))
      report.removed += is_entry_file(f);
    if (f.kind == detail::CacheFileKind::pch)
      remove_or_note([&] { return remove_pch(fd, f.name); }, shown, &report.failures);
  }
  return report;
}

DiskCache& default_cache() {
  static DiskCache cache(CacheConfig::from_environment());
  return cache;
}

CacheStats cache_stats() { return default_cache().stats(); }
ClearReport clear_cache() { return default_cache().clear(); }
VerifyReport verify_cache() { return default_cache().verify(); }
PruneReport prune(std::uint64_t max_bytes) { return default_cache().prune(max_bytes); }

}  // namespace kiln
