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
// Reading one costs bounded memory whatever the file holds: the header is checked against the file's size
// first, then the manifest (at most 16 MiB) whose entries' sizes must add up to the bytes after it (so a
// large file that is no whole pack is refused before it is read), the digest is taken in 1 MiB pieces,
// then one entry at a time.
#include <kiln/cache_pack.hpp>
#include <kiln/error.hpp>

#include "base/plain_file.hpp"
#include "chain/entry.hpp"
#include "chain/key.hpp"
#include "remote/hmac.hpp"

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
// Larger packs are refused: export them per registry or arch.
constexpr std::uint64_t kMaxPackBytes = std::uint64_t{4} << 30;
// ~100 bytes a line: some 160,000 entries.
constexpr std::uint64_t kMaxManifestBytes = std::uint64_t{16} << 20;
constexpr std::size_t kReadPiece = std::size_t{1} << 20;

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

// What is wrong with a pack: import_pack and inspect_pack each say it in their own words.
struct Refused {
  std::string why;
};

[[noreturn]] void refuse(const std::filesystem::path&, const std::string& why) { throw Refused{why}; }

// A pack file opened for reading (a regular file only: a FIFO or device cannot block the open), read in
// pieces at offsets.
class PackFile {
 public:
  // `command`: "cache import", "cache show", for messages.
  PackFile(const std::filesystem::path& path, std::string_view command) : path_(path), command_(command) {
    auto fd = detail::open_regular(path, O_RDONLY);
    if (!fd) throw Error(Errc::cache, "kiln: " + command_ + ": " + fd.error());
    fd_ = std::move(fd).value();
    struct stat st {};
    if (::fstat(fd_.get(), &st) != 0)
      throw Error(Errc::cache, "kiln: " + command_ + ": cannot stat " + path.string() + ": " + std::strerror(errno));
    size_ = static_cast<std::uint64_t>(st.st_size);
  }
  std::uint64_t size() const noexcept { return size_; }

  // Exactly `size` bytes from `offset`, or Error(cache) saying why not.
  std::string read(std::uint64_t offset, std::uint64_t size) const {
    std::string bytes(static_cast<std::size_t>(size), '\0');
    for (std::size_t done = 0; done < bytes.size();) {
      const ssize_t n = ::pread(fd_.get(), bytes.data() + done, bytes.size() - done, static_cast<off_t>(offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0)
        throw Error(Errc::cache, "kiln: " + command_ + ": cannot read " + path_.string() + ": " +
                                     (n < 0 ? std::string("read: ") + std::strerror(errno) : "it shrank while being read"));
      done += static_cast<std::size_t>(n);
    }
    return bytes;
  }

 private:
  std::filesystem::path path_;
  std::string command_;
  detail::UniqueFd fd_;
  std::uint64_t size_ = 0;
};

struct PackEntry {
  CacheKey key;
  std::uint64_t offset = 0, size = 0;
  detail::Sha256Digest sum{};  // of the bytes checked: what is stored must be them
  std::string compiler;        // what built it (CacheEntry::compiler)
};

// The header: magic, versions, the manifest's size within the file. refuse() for the first problem.
std::uint64_t check_header(const std::filesystem::path& path, const PackFile& pack) {
  if (pack.size() == 0) refuse(path, "it is empty");
  const std::string head = pack.read(0, std::min<std::uint64_t>(pack.size(), kPackHeaderSize));
  if (!std::string_view(head).starts_with(kPackMagic) && !kPackMagic.starts_with(head))
    refuse(path, "it is not a kiln cache pack (it does not start with a pack's magic bytes)");
  if (pack.size() < kPackHeaderSize + kDigestSize)
    refuse(path, "it is truncated (" + std::to_string(pack.size()) + " bytes, shorter than a pack's header and digest)");
  if (pack.size() > kMaxPackBytes)
    refuse(path, "it is larger than " + std::to_string(kMaxPackBytes >> 30) + " GiB; export packs per registry or arch");
  const auto version = get<std::uint32_t>(head, kPackMagic.size());
  const auto entry_version = get<std::uint32_t>(head, kPackMagic.size() + 4);
  const auto manifest_size = get<std::uint64_t>(head, kPackMagic.size() + 8);
  if (version != kPackFormatVersion)
    refuse(path, "pack format version " + std::to_string(version) + "; this kiln reads version " +
                     std::to_string(kPackFormatVersion));
  if (entry_version != kCacheFormatVersion)
    refuse(path, "its entries are in cache format " + std::to_string(entry_version) + ", this kiln's are format " +
                     std::to_string(kCacheFormatVersion) + ": export the pack again with this kiln");
  if (manifest_size > pack.size() - kPackHeaderSize - kDigestSize)
    refuse(path, "it is truncated or altered: its manifest (" + std::to_string(manifest_size) +
                     " bytes) runs past the end of the pack");
  if (manifest_size > kMaxManifestBytes)
    refuse(path, "its manifest is " + std::to_string(manifest_size) + " bytes, more than a pack may have (" +
                     std::to_string(kMaxManifestBytes >> 20) + " MiB)");
  return manifest_size;
}

// Whether the SHA-256 of everything before the last 32 bytes is what they record; read in pieces.
void check_digest(const std::filesystem::path& path, const PackFile& pack) {
  const std::uint64_t body = pack.size() - kDigestSize;
  detail::Sha256 sum;
  for (std::uint64_t at = 0; at < body;) {
    const std::uint64_t piece = std::min<std::uint64_t>(kReadPiece, body - at);
    const std::string bytes = pack.read(at, piece);
    sum.update(bytes.data(), bytes.size());
    at += piece;
  }
  const auto digest = sum.final();
  if (std::memcmp(digest.data(), pack.read(body, kDigestSize).data(), kDigestSize) != 0)
    refuse(path, "it is damaged: truncated or altered (the SHA-256 of its first " + std::to_string(body) +
                     " bytes is not the one its last 32 bytes record)");
}

// The entries' sizes the manifest lists against the bytes that follow it, before the digest reads the whole
// file: a pack whose sizes do not add up is refused at once, however large. A manifest that does not parse
// is left to the digest (altered) and then to check_pack (crafted), which name the line.
void check_sizes(const std::filesystem::path& path, const PackFile& pack, std::string_view manifest) {
  const std::uint64_t data = pack.size() - kDigestSize - kPackHeaderSize - manifest.size();
  std::uint64_t listed = 0, count = 0;
  while (!manifest.empty()) {
    const std::size_t eol = manifest.find('\n');
    const std::string_view line = manifest.substr(0, eol);
    const std::size_t space = line.find(' ');
    std::uint64_t size = 0;
    if (eol == std::string_view::npos || space == std::string_view::npos ||
        std::from_chars(line.data() + space + 1, line.data() + line.size(), size).ec != std::errc())
      return;
    manifest.remove_prefix(eol + 1);
    ++count;
    if (size > detail::kMaxEntryFileBytes)
      refuse(path, "entry " + std::to_string(count) + " is " + std::to_string(size) +
                       " bytes, larger than a cache entry can be");
    listed += size;  // no overflow: each at most kMaxEntryFileBytes, at most 16 MiB of lines
    if (listed > data) break;
  }
  if (listed != data)
    refuse(path, "it is damaged: truncated or altered (its manifest lists " + std::to_string(listed) +
                     " bytes of entries" + (listed > data ? " or more" : "") + ", but " + std::to_string(data) +
                     " bytes follow it)");
}

// Every entry of a pack, each checked as DiskCache::load checks one and against its manifest line (key,
// size, registry/unit, architecture); refuse() for the first problem. One entry in memory at a time.
std::vector<PackEntry> check_pack(const std::filesystem::path& path, const PackFile& pack) {
  const std::uint64_t manifest_size = check_header(path, pack);
  const std::string manifest_bytes = pack.read(kPackHeaderSize, manifest_size);
  check_sizes(path, pack, manifest_bytes);
  check_digest(path, pack);
  std::string_view manifest = manifest_bytes;
  const std::uint64_t data_end = pack.size() - kDigestSize;
  std::uint64_t offset = kPackHeaderSize + manifest_size;
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
    const std::string_view label = std::string_view(end, static_cast<std::size_t>(rest.data() + rest.size() - end));
    if (hex.size() != 64 || ec != std::errc() || end == rest.data() || !label.starts_with(' '))
      refuse(path, where + " is not '<key> <bytes> <registry>/<unit> sm_<arch>': '" + std::string(line.substr(0, 120)) + "'");
    if (size > data_end - offset) refuse(path, where + ": its entry runs past the end of the pack");
    const std::string entry_name = "entry " + std::to_string(entries.size() + 1) + " (key " + std::string(hex.substr(0, 16)) + ")";
    if (size > detail::kMaxEntryFileBytes)
      refuse(path, entry_name + " is " + std::to_string(size) + " bytes, larger than a cache entry can be");
    const std::string file = pack.read(offset, size);
    const auto regions = detail::split_entry(file);
    auto key = regions ? detail::key_from_text(regions->key_text) : std::nullopt;
    if (!regions) refuse(path, entry_name + " is not a valid cache entry: " + regions.error());
    if (!key) refuse(path, entry_name + " is not a valid cache entry: its key text names no architecture");
    if (key->hex != hex) refuse(path, entry_name + ": the manifest's key is not the SHA-256 of the entry's key text");
    const std::string named = " " + detail::key_field(key->text, "registry") + "/" + detail::key_field(key->text, "unit") +
                              " sm_" + std::to_string(key->arch);
    if (label != named)
      refuse(path, where + " says '" + std::string(label.substr(1, 120)) + "', but its entry is '" + named.substr(1) + "'");
    auto decoded = detail::decode_entry(file, *key);
    if (!decoded)
      refuse(path, entry_name + ", " + detail::describe_key(*key) + ", is not a valid cache entry: " + decoded.error());
    entries.push_back({std::move(*key), offset, size, detail::sha256(file), std::move(decoded->compiler)});
    offset += size;
  }
  if (offset != data_end) refuse(path, std::to_string(data_end - offset) + " bytes follow the last entry the manifest lists");
  return entries;
}

}  // namespace

bool EntryFilter::matches(const CacheKey& key) const {
  return (registry.empty() || detail::key_field(key.text, "registry") == registry) && (arch == 0 || key.arch == arch);
}

PackReport export_pack(DiskCache& cache, const std::filesystem::path& file, const EntryFilter& filter) {
  if (!cache.usable()) throw Error(Errc::cache, "kiln: cache export: the disk cache is not in use: " + cache.unusable_reason().message);
  // Beside the target under a name nobody can guess, created exclusively, then renamed over it: a reader
  // never sees half a pack, and a link planted in a shared directory is never written through. Made first:
  // a target that is no file to replace (a device, a FIFO) is refused before the entries are read.
  auto out = detail::ReplacingFile::create(file);
  if (!out) throw Error(Errc::cache, "kiln: cache export: cannot write " + file.string() + " (" + out.error() + ")");
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

  detail::Status written = out->write(pack);
  if (written) written = out->commit();
  if (!written) throw Error(Errc::cache, "kiln: cache export: cannot write " + file.string() + " (" + written.error() + ")");
  return report;
}

PackReport import_pack(DiskCache& cache, const std::filesystem::path& file) {
  if (!cache.usable()) throw Error(Errc::cache, "kiln: cache import: the disk cache is not in use: " + cache.unusable_reason().message);
  const PackFile pack(file, "cache import");
  std::vector<PackEntry> entries;
  try {
    entries = check_pack(file, pack);  // all of it, before anything is written
  } catch (const Refused& r) {
    throw Error(Errc::cache, "kiln: cache import: " + file.string() + " is refused, nothing was imported: " + r.why);
  }
  PackReport report;
  report.entries = entries.size();
  report.bytes = pack.size();
  for (const PackEntry& e : entries) {
    const std::string bytes = pack.read(e.offset, e.size);
    if (detail::sha256(bytes) != e.sum)
      throw Error(Errc::cache, "kiln: cache import: " + file.string() + " changed while it was imported; " +
                                   std::to_string(report.added) + " of its " + std::to_string(entries.size()) +
                                   " entries were added (each checked), the rest not");
    const bool had = cache.contains(e.key);
    if (!cache.store_file(e.key, bytes))
      throw Error(Errc::cache, "kiln: cache import: the pack " + file.string() + " is sound, but the disk cache " +
                                   cache.config().dir.string() + " took only " + std::to_string(report.added) + " of its " +
                                   std::to_string(entries.size()) + " entries: " +
                                   (cache.warnings().empty() ? std::string("it cannot be written") : cache.warnings().back()));
    report.added += !had;
  }
  return report;
}

PackContents inspect_pack(const std::filesystem::path& file) {
  const PackFile pack(file, "cache show");
  PackContents contents;
  contents.bytes = pack.size();
  try {
    for (PackEntry& e : check_pack(file, pack)) contents.entries.push_back({std::move(e.key), e.size, std::move(e.compiler)});
  } catch (const Refused& r) {
    throw Error(Errc::cache, "kiln: cache show: " + file.string() + " is not a sound cache pack: " + r.why);
  }
  return contents;
}

}  // namespace kiln
