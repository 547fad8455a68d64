// Cache packs (kiln/cache_pack.hpp): a disk cache's entries in one file, checked whole before use.
//
// Layout (integers little-endian):
//   magic            "\x89KILN-PACK\r\n\x1a\n" (14 bytes: a non-ASCII first byte, CR LF and ^Z, as entries have)
//   u32 pack format  kPackFormatVersion
//   u32 entry format kCacheFormatVersion of the entries inside
//   u64 manifest size, then the manifest: one line per entry, "<key hex> <bytes> <registry>/<unit> sm_<arch>\n"
//   the entry files, in manifest order, each byte for byte as the disk cache stores it
//   SHA-256 of everything before it (32 bytes)
// Why this and not tar or zip: a pack is written once and read whole, so one digest over the file says at
// once whether it arrived intact, before any of it is parsed; the manifest is text `head` shows; the
// entries are already compressed and carry their own checks, so they are copied as they are. A tar would
// need its digest in a second file and a parser for its headers, a zip brings compression for nothing.
#include <kiln/cache_pack.hpp>
#include <kiln/error.hpp>

#include "chain/entry.hpp"
#include "chain/key.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <vector>

namespace kiln {

namespace {

// !!! Bump on any change to the layout above; tests/cpu/test_cache_pack.cpp checks that readers refuse others.
constexpr std::uint32_t kPackFormatVersion = 1;
constexpr std::string_view kPackMagic{"\x89KILN-PACK\r\n\x1a\n", 14};
constexpr std::size_t kPackHeaderSize = kPackMagic.size() + 4 + 4 + 8;
constexpr std::size_t kDigestSize = 32;
// A pack is read into memory whole; larger ones are refused rather than exhausting it.
constexpr std::uint64_t kMaxPackBytes = std::uint64_t{4} << 30;

template <typename T>
void put(std::string& out, T value) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));
  out.append(bytes, sizeof(T));
}

template <typename T>
T get(std::string_view bytes, std::size_t offset) {
  T value;
  std::memcpy(&value, bytes.data() + offset, sizeof(T));
  return value;
}

[[noreturn]] void refuse(const std::filesystem::path& file, const std::string& why) {
  throw Error(Errc::cache, "kiln: cache import: " + file.string() + " is refused, nothing was imported: " + why);
}

// The whole file, or Error(cache) saying why not.
std::string read_pack(const std::filesystem::path& file) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) throw Error(Errc::cache, "kiln: cache import: cannot open " + file.string() + ": " + std::strerror(errno));
  struct stat st {};
  std::string bytes;
  std::string problem;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    problem = "it is not a regular file";
  } else if (static_cast<std::uint64_t>(st.st_size) > kMaxPackBytes) {
    problem = "it is larger than " + std::to_string(kMaxPackBytes >> 30) + " GiB; export packs per registry or arch";
  } else {
    bytes.resize(static_cast<std::size_t>(st.st_size));
    std::size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t n = ::read(fd, bytes.data() + done, bytes.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        problem = n < 0 ? std::string("read: ") + std::strerror(errno) : "it shrank while being read";
        break;
      }
      done += static_cast<std::size_t>(n);
    }
  }
  ::close(fd);
  if (!problem.empty()) throw Error(Errc::cache, "kiln: cache import: cannot read " + file.string() + ": " + problem);
  return bytes;
}

struct PackEntry {
  CacheKey key;
  std::string_view file;
};

// Every entry of a pack, each checked as DiskCache::load checks one; refuse() for the first problem.
std::vector<PackEntry> check_pack(const std::filesystem::path& path, std::string_view pack) {
  if (pack.empty()) refuse(path, "it is empty");
  if (!pack.starts_with(kPackMagic) && !kPackMagic.starts_with(pack))
    refuse(path, "it is not a kiln cache pack (it does not start with a pack's magic bytes)");
  if (pack.size() < kPackHeaderSize + kDigestSize)
    refuse(path, "it is truncated (" + std::to_string(pack.size()) + " bytes, shorter than a pack's header and digest)");
  const std::string_view body = pack.substr(0, pack.size() - kDigestSize);
  const auto digest = detail::sha256(body);
  if (std::memcmp(digest.data(), pack.data() + body.size(), kDigestSize) != 0)
    refuse(path, "it is damaged: truncated or altered (the SHA-256 of its first " + std::to_string(body.size()) +
                     " bytes is not the one its last 32 bytes record)");
  const auto version = get<std::uint32_t>(pack, kPackMagic.size());
  const auto entry_version = get<std::uint32_t>(pack, kPackMagic.size() + 4);
  const auto manifest_size = get<std::uint64_t>(pack, kPackMagic.size() + 8);
  if (version != kPackFormatVersion)
    refuse(path, "pack format version " + std::to_string(version) + "; this kiln reads version " +
                     std::to_string(kPackFormatVersion));
  if (entry_version != kCacheFormatVersion)
    refuse(path, "its entries are in cache format " + std::to_string(entry_version) + ", this kiln's are format " +
                     std::to_string(kCacheFormatVersion) + ": export the pack again with this kiln");
  if (manifest_size > body.size() - kPackHeaderSize) refuse(path, "its manifest runs past the end of the pack");
  std::string_view manifest = body.substr(kPackHeaderSize, manifest_size);
  std::string_view data = body.substr(kPackHeaderSize + manifest_size);
  std::vector<PackEntry> entries;
  while (!manifest.empty()) {
    const std::size_t eol = manifest.find('\n');
    if (eol == std::string_view::npos) refuse(path, "its manifest's last line is not terminated");
    const std::string_view line = manifest.substr(0, eol);
    manifest.remove_prefix(eol + 1);
    const std::string where = "manifest line " + std::to_string(entries.size() + 1);
    const std::size_t space = line.find(' ');
    const std::string_view hex = line.substr(0, space);
    std::uint64_t size = 0;
    const std::string_view rest = space == std::string_view::npos ? std::string_view{} : line.substr(space + 1);
    const auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), size);
    if (hex.size() != 64 || ec != std::errc() || end == rest.data())
      refuse(path, where + " is not '<key> <bytes> ...': '" + std::string(line.substr(0, 120)) + "'");
    if (size > data.size()) refuse(path, where + ": its entry runs past the end of the pack");
    const std::string_view file = data.substr(0, size);
    data.remove_prefix(size);
    const auto regions = detail::split_entry(file);
    auto key = regions ? detail::key_from_text(regions->key_text) : std::nullopt;
    const std::string entry_name = "entry " + std::to_string(entries.size() + 1) + " (key " + std::string(hex.substr(0, 16)) + ")";
    if (!regions) refuse(path, entry_name + " is not a valid cache entry: " + regions.error());
    if (!key) refuse(path, entry_name + " is not a valid cache entry: its key text names no architecture");
    if (key->hex != hex) refuse(path, entry_name + ": the manifest's key is not the SHA-256 of the entry's key text");
    if (const auto decoded = detail::decode_entry(file, *key); !decoded)
      refuse(path, entry_name + ", " + detail::describe_key(*key) + ", is not a valid cache entry: " + decoded.error());
    entries.push_back({std::move(*key), file});
  }
  if (!data.empty()) refuse(path, std::to_string(data.size()) + " bytes follow the last entry the manifest lists");
  return entries;
}

}  // namespace

bool EntryFilter::matches(const CacheKey& key) const {
  return (registry.empty() || detail::key_field(key.text, "registry") == registry) && (arch == 0 || key.arch == arch);
}

PackReport export_pack(DiskCache& cache, const std::filesystem::path& file, const EntryFilter& filter) {
  if (!cache.usable()) throw Error(Errc::cache, "kiln: cache export: the disk cache is not in use: " + cache.unusable_reason());
  std::string manifest;
  std::string data;
  PackReport report;
  cache.for_each_entry([&](const CacheKey& key, std::string_view bytes) {
    if (!filter.matches(key)) return;
    manifest += key.hex + " " + std::to_string(bytes.size()) + " " + detail::key_field(key.text, "registry") + "/" +
                detail::key_field(key.text, "unit") + " sm_" + std::to_string(key.arch) + "\n";
    data += bytes;
    ++report.entries;
  });
  std::string pack;
  pack.reserve(kPackHeaderSize + manifest.size() + data.size() + kDigestSize);
  pack += kPackMagic;
  put<std::uint32_t>(pack, kPackFormatVersion);
  put<std::uint32_t>(pack, kCacheFormatVersion);
  put<std::uint64_t>(pack, manifest.size());
  pack += manifest;
  pack += data;
  const auto digest = detail::sha256(pack);
  pack.append(reinterpret_cast<const char*>(digest.data()), digest.size());
  report.bytes = pack.size();

  // Beside the target, then renamed over it: a reader never sees half a pack.
  const std::filesystem::path temp = file.string() + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOCTTY, 0644);
  std::string problem = fd < 0 ? std::string("open: ") + std::strerror(errno) : std::string();
  for (std::size_t done = 0; problem.empty() && done < pack.size();) {
    const ssize_t n = ::write(fd, pack.data() + done, pack.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) problem = std::string("write: ") + std::strerror(errno);
    else done += static_cast<std::size_t>(n);
  }
  if (problem.empty() && ::fsync(fd) != 0) problem = std::string("fsync: ") + std::strerror(errno);
  if (fd >= 0 && ::close(fd) != 0 && problem.empty()) problem = std::string("close: ") + std::strerror(errno);
  if (problem.empty() && ::rename(temp.c_str(), file.c_str()) != 0) problem = std::string("rename: ") + std::strerror(errno);
  if (!problem.empty()) {
    ::unlink(temp.c_str());
    throw Error(Errc::cache, "kiln: cache export: cannot write " + file.string() + " (" + problem + ")");
  }
  return report;
}

PackReport import_pack(DiskCache& cache, const std::filesystem::path& file) {
  if (!cache.usable()) throw Error(Errc::cache, "kiln: cache import: the disk cache is not in use: " + cache.unusable_reason());
  const std::string pack = read_pack(file);
  const std::vector<PackEntry> entries = check_pack(file, pack);  // all of it, before anything is written
  PackReport report;
  report.entries = entries.size();
  report.bytes = pack.size();
  for (const PackEntry& e : entries) {
    const bool had = cache.contains(e.key);
    if (!cache.store_file(e.key, e.file))
      throw Error(Errc::cache, "kiln: cache import: the pack " + file.string() + " is sound, but the disk cache " +
                                   cache.config().dir.string() + " took only " + std::to_string(report.added) + " of its " +
                                   std::to_string(entries.size()) + " entries: " +
                                   (cache.warnings().empty() ? std::string("it cannot be written") : cache.warnings().back()));
    report.added += !had;
  }
  return report;
}

}  // namespace kiln
