// Tier 3: a zstd-compressed, crash-safe, content-addressed cache of compiled kernels on disk.
#pragma once

#include <kiln/config.hpp>  // C++20, checked first

#include <kiln/error.hpp>  // Reason

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

namespace detail {
struct CacheAccess;
}  // namespace detail

// !!! The on-disk entry format version. Bump it on ANY change to the entry layout: header, key text,
// !!! payload fields or their order. tests/cpu/golden/ holds an entry per version and fails otherwise.
// 2: the same layout; what a key means changed. Version 1's PTX tier kept a binary built from
// an older architecture's PTX (that architecture's CUB policies) under the device's plain key, where a
// plan took it for the device's own; such a binary now has a key of its own (CacheKeyFields::code_arch).
// The bump leaves every version-1 entry, and so those, unread.
// 3: the payload's binary is a list of images, each with the indices of its kernels: a unit compiled in
// parts is one entry of several cubins (CacheEntry::parts).
inline constexpr std::uint32_t kCacheFormatVersion = 3;

// Everything that changes a cached binary, in readable form. The key is SHA-256 over text().
struct CacheKeyFields {
  std::string registry;       // catalog name
  std::string unit;           // unit name
  std::string source_digest;  // SHA-256 (hex), computed at build time, of the unit's translation unit,
                              // every header it includes, its name expressions and its options
  unsigned arch = 0;          // SM number the binary is for (90 = sm_90)
  std::string nvrtc;          // versions of the compilers loaded to build it, "13.0"
  std::string nvjitlink;
  std::string cccl;           // "3.0.1"
  std::string linked;         // a unit linked with code given at run time (Registry::get with a
                              // LinkedSource): SHA-256 (hex) of that code; empty, and no line, otherwise
  unsigned code_arch = 0;     // the virtual architecture the code was compiled for (80: compute_80) when
                              // it is not `arch`'s: embedded PTX or LTO-IR of an older architecture, whose
                              // CUB policies are that architecture's; 0, and no line, when it is `arch`'s

  // "format=1\nregistry=...\nunit=...\nsource=...\narch=sm_90\nnvrtc=...\nnvjitlink=...\ncccl=...\n";
  // in values, control bytes are written \xHH and a backslash \\, so no value can forge another line.
  std::string text() const;
};

struct CacheKey {
  std::string hex;   // 64 hex characters; names the entry file
  std::string text;  // the readable key, stored in the entry and compared on load
  unsigned arch = 0;

  static CacheKey from(const CacheKeyFields& fields);
};

struct CachedKernel {
  std::string name;     // registry name
  std::string lowered;  // mangled symbol in the cubin
};

// One image of an entry whose unit was compiled in parts, each part some of its kernels (docs/DESIGN.md,
// "A unit's kernels over several workers"): a cubin, and which of the entry's kernels it defines.
struct CachedImage {
  std::string cubin;
  std::vector<std::uint32_t> kernels;  // indices into CacheEntry::kernels
};

struct CacheEntry {
  unsigned arch = 0;
  std::vector<CachedKernel> kernels;
  std::string options;   // compile options, one per line
  std::string compiler;  // what built it, e.g. "nvrtc 13.0 + nvjitlink 13.0"; then, on later lines, the digests
                         // of its key's parts (what `kiln why` compares), where kiln recorded them
  std::string cubin;     // the device binary (ELF) of a unit compiled whole; empty where `parts` hold the code
  // A unit compiled in parts: two images or more, each loaded as a library of its own, every kernel in
  // exactly one. Its key is the whole unit's: the kernels are the same, only packed otherwise.
  std::vector<CachedImage> parts;
};

struct CacheConfig {
  std::filesystem::path dir;
  bool enabled = true;
  // The size cap, least recently used entries evicted past it; 0 means no cap (as ccache's max_size = 0).
  std::uint64_t max_bytes = std::uint64_t{1} << 30;
  // How long get_or_build waits for another process building the same key before building it too (one
  // warning): at least the longest compile. A holder that died or is stopped is not waited for.
  std::chrono::seconds lock_timeout{300};

  // KILN_CACHE=off disables; the directory is $KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else
  // ~/.cache/kiln; KILN_CACHE_MAX_BYTES sets the cap (default 1 GiB, 0: none), KILN_CACHE_LOCK_TIMEOUT
  // the wait in seconds (default 300). A value that is not one keeps the default, with a warning.
  static CacheConfig from_environment();
};

struct CacheStats {
  std::uint64_t entries = 0;    // on disk now
  std::uint64_t pch_files = 0;  // precompiled headers the JIT pool keeps beside the entries
  std::uint64_t bytes = 0;      // entries, PCH files and their sums: what the cap bounds
  // this process, this cache object:
  std::uint64_t hits = 0;
  std::uint64_t misses = 0;
  std::uint64_t corrupt = 0;  // entries found bad, deleted and counted as misses
  std::uint64_t stores = 0;
  std::uint64_t store_failures = 0;
  std::uint64_t evictions = 0;
};

struct VerifyReport {
  std::uint64_t checked = 0;
  std::uint64_t removed = 0;
  std::vector<std::string> problems;  // "<file>: <what was wrong>", one per bad file (removed, or said why not)
  // What could not be done, and why ("<file>: not removed: Read-only file system"): a bad file that could
  // not be removed, or a file others may read or write (kiln's are 0600). Empty when verify did its job.
  std::vector<std::string> failures;
};

struct ClearReport {
  std::uint64_t removed = 0;          // entries removed
  std::vector<std::string> failures;  // what could not be removed, and why (a read-only directory, a permission)
};

struct PruneReport {
  std::uint64_t removed = 0;      // entries evicted, least recently used first
  std::uint64_t pch_removed = 0;  // PCH files evicted, before any entry
  std::uint64_t bytes_before = 0;
  std::uint64_t bytes_after = 0;
  std::uint64_t stray_removed = 0;  // temp files of dead writers, stale lock files
  std::vector<std::string> failures;  // what could not be evicted, and why; empty when the cap was met
};

// One cache directory. Thread-safe; any number of processes may share the directory.
// I/O problems never throw: a read problem is a miss, a write problem is one warning and `false`.
// What DiskCache::lookup found: the entry, or why there is none (code cache: absent, unreadable, refused,
// corrupt, made for another key, or the cache not in use).
struct CacheLookup {
  std::optional<CacheEntry> entry;
  Reason miss;  // empty on a hit
  explicit operator bool() const noexcept { return entry.has_value(); }
};

class DiskCache {
 public:
  explicit DiskCache(CacheConfig config);
  ~DiskCache();
  DiskCache(const DiskCache&) = delete;
  DiskCache& operator=(const DiskCache&) = delete;

  // Enabled, and the directory exists (created 0700) and is private to this user.
  bool usable() const noexcept;
  // Why not usable (empty when usable; code cache): disabled by KILN_CACHE=off, or refused because others
  // can write it, ...
  const Reason& unusable_reason() const noexcept;
  const CacheConfig& config() const noexcept;

  // Whether an entry file exists for the key: one stat, nothing read.
  bool contains(const CacheKey& key) const;
  // The entry, fully validated (header, key text, zstd checksum, payload, the cubin's ELF header and
  // kernel symbols) before anything reaches the driver, or why there is none. A bad entry is counted,
  // deleted, and a miss. A hit marks the entry most recently used.
  CacheLookup lookup(const CacheKey& key);
  // lookup()'s entry alone, for callers to whom every miss is the same.
  std::optional<CacheEntry> load(const CacheKey& key);
  // Publishes atomically (unique temp file in the directory, then rename), then prunes to the cap
  // (never the entry just stored). An entry larger than the cap is not stored (false, one warning).
  bool store(const CacheKey& key, const CacheEntry& entry);
  // The cached entry, or build() under a per-key file lock with a re-check after locking, so that
  // threads and processes missing one key at once build it once. The wait for another process's lock
  // is bounded (config().lock_timeout); a holder that died or is stopped is not waited for: then build()
  // runs without the lock, with one warning. Exceptions from build() propagate; nothing is stored then.
  CacheEntry get_or_build(const CacheKey& key, const std::function<CacheEntry()>& build);
  // Publishes an entry file encoded elsewhere (a remote cache's value, a cache pack's member) as store()
  // does, byte for byte, after checking that it is an entry file for `key` (header, key text, frame
  // digest: the caller has decoded it fully). False, counted and warned once, when it is not or cannot be
  // written.
  bool store_file(const CacheKey& key, std::string_view file);
  // Calls `visit` with the key and the bytes of every entry that verifies as load() would, in key order;
  // bad files are skipped (verify() removes them). For cache packs and `kiln cache push`.
  void for_each_entry(const std::function<void(const CacheKey& key, std::string_view file)>& visit);

  CacheStats stats() const;
  // Neither removes a directory, which kiln never makes at a file's name: a user's, left with a warning.
  // Removes every entry, PCH, temp and lock file: how many entries, and what could not be removed.
  ClearReport clear();
  VerifyReport verify();  // loads every entry and checks every PCH file, removes bad ones and stray files
  // Evicts PCH files first (oldest first: an entry never goes to make room for a PCH), then least
  // recently used entries, down to max_bytes (0: all).
  PruneReport prune(std::uint64_t max_bytes);

  // The warnings this object has printed (each kind once per object), for tests and `kiln cache`.
  std::vector<std::string> warnings() const;

 private:
  friend struct detail::CacheAccess;  // kiln's tiers: loads and builds that check an entry serves its unit
  struct State;
  State* state_;
};

// The process-wide cache configured from the environment, created on first use.
DiskCache& default_cache();
CacheStats cache_stats();
ClearReport clear_cache();
VerifyReport verify_cache();
PruneReport prune(std::uint64_t max_bytes);

}  // namespace kiln
