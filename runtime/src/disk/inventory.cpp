// Listing a cache directory: each entry's header and key text, read bounded, and the precompiled headers.
#include "disk/inventory.hpp"

#include "chain/entry.hpp"
#include "chain/key.hpp"
#include "disk/cache_state.hpp"
#include "disk/files.hpp"

#include <algorithm>
#include <optional>
#include <tuple>

namespace kiln::detail {

namespace {

std::optional<PrivateDir> open_for_reading(CacheState& s) {
  auto dir = s.open(false);
  if (!dir || !*dir) return std::nullopt;
  return std::move(**dir);
}

}  // namespace

Inventory take_inventory(DiskCache& cache) {
  Inventory inv;
  if (!cache.usable()) return inv;
  CacheState& s = CacheAccess::of(cache);
  const auto dir = open_for_reading(s);
  if (!dir) return inv;
  const int fd = dir->fd.get();
  for (const ScannedFile& f : scan_cache_dir(fd)) {
    if (!S_ISREG(f.st.st_mode)) continue;
    if (f.kind == CacheFileKind::pch || f.kind == CacheFileKind::pch_sum) {
      inv.pch_files += f.kind == CacheFileKind::pch;
      inv.pch_bytes += static_cast<std::uint64_t>(f.st.st_size);
      continue;
    }
    if (f.kind != CacheFileKind::entry) continue;
    const auto shown = s.entries / f.name;
    const EntryFile file = read_entry_file(fd, f.name, shown, true);
    if (file.status == EntryFile::Status::missing) continue;  // evicted meanwhile
    if (file.status != EntryFile::Status::ok) {
      inv.unreadable.push_back(shown.string() + ": " + file.problem);
      continue;
    }
    auto key = key_from_text(std::string_view(file.bytes).substr(kEntryHeaderSize));
    if (!key || key->hex != classify_cache_file(f.name).stem) {
      inv.unreadable.push_back(shown.string() + ": " + (key ? "file name is not the SHA-256 of the entry's key text"
                                                            : "key text names no architecture"));
      continue;
    }
    ListedEntry e;
    e.registry = key_field(key->text, "registry");
    e.unit = key_field(key->text, "unit");
    e.key = std::move(*key);
    e.bytes = static_cast<std::uint64_t>(file.st.st_size);
    e.used = file.st.st_mtim.tv_sec;
    inv.entries.push_back(std::move(e));
  }
  std::sort(inv.entries.begin(), inv.entries.end(), [](const ListedEntry& a, const ListedEntry& b) {
    return std::tie(a.registry, a.unit, a.key.arch, a.key.hex) < std::tie(b.registry, b.unit, b.key.arch, b.key.hex);
  });
  std::sort(inv.unreadable.begin(), inv.unreadable.end());
  return inv;
}

Result<CacheEntry> read_listed(DiskCache& cache, const ListedEntry& listed) {
  CacheState& s = CacheAccess::of(cache);
  const auto dir = open_for_reading(s);
  if (!dir) return fail("the cache directory cannot be opened");
  const std::string name = entry_file_name(listed.key.hex);
  const EntryFile file = read_entry_file(dir->fd.get(), name, s.entries / name);
  if (file.status == EntryFile::Status::missing) return fail("evicted meanwhile");
  if (file.status != EntryFile::Status::ok) return fail(file.problem);
  return decode_entry(file.bytes, listed.key);
}

std::string made_by(const CacheEntry& entry) {
  return entry.compiler.starts_with("embedded PTX") ? "ptx" : "jit";
}

}  // namespace kiln::detail
