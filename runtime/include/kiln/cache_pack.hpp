// Cache packs: a disk cache's entries in one verified file, to start other machines warm.
//
// A pack is checked whole before anything of it is used: the entries' sizes its manifest lists against the
// file's size, its SHA-256, its manifest, then every entry as DiskCache::load checks one. A truncated or altered pack is refused whole, with the reason. Trust: a
// pack is as trustworthy as its source, like any binary you install (docs/DESIGN.md, "The remote tier").
#pragma once

#include <kiln/config.hpp>  // C++20, checked first

#include <kiln/cache.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace kiln {

// Only entries of `registry` (empty: any) built for `arch` (90 for sm_90; 0: any).
struct EntryFilter {
  std::string registry;
  unsigned arch = 0;

  bool matches(const CacheKey& key) const;
};

struct PackReport {
  std::uint64_t entries = 0;  // in the pack
  std::uint64_t bytes = 0;    // the pack file's size
  std::uint64_t added = 0;    // import: entries the cache did not have before
};

// Writes every entry of `cache` that matches `filter` into the pack `file` (written to a temporary file
// beside it, then renamed). Throws Error(cache) when the cache is not in use or the file cannot be written,
// or exists and is not a regular file or a link (a device, a FIFO: refused before anything is read).
PackReport export_pack(DiskCache& cache, const std::filesystem::path& file, const EntryFilter& filter = {});

// One entry of a pack, as its manifest and the entry itself say.
struct PackMember {
  CacheKey key;
  std::uint64_t bytes = 0;  // its entry file's size
  std::string compiler;     // what built it (CacheEntry::compiler)
};

struct PackContents {
  std::uint64_t bytes = 0;  // the pack file's size
  std::vector<PackMember> entries;  // in manifest order
};

// Checks the whole pack `file` as import_pack does (the entries' sizes against the file's first, then its
// digest, manifest and every entry, one at a time) and says
// what it holds; reads nothing else and changes nothing. Throws Error(cache) naming what is wrong.
PackContents inspect_pack(const std::filesystem::path& file);

// Checks the whole pack `file`, and only then adds its entries to `cache`. Throws Error(cache) naming the
// file and what is wrong with it (nothing added), or the cache's problem.
PackReport import_pack(DiskCache& cache, const std::filesystem::path& file);

}  // namespace kiln
