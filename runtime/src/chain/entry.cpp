// One cache entry file: header, key text, zstd frame; see chain/entry.hpp for the layout.
#include "chain/entry.hpp"

#include "chain/key.hpp"
#include "base/cubin_elf.hpp"
#include "base/zstd_context.hpp"

#include <kiln/error.hpp>
#include <zstd.h>
#include <zstd_errors.h>

#include <bit>
#include <cstring>
#include <memory>
#include <optional>
#include <stdexcept>

namespace kiln::detail {

static_assert(std::endian::native == std::endian::little, "the entry format is little-endian; add byte swaps");

namespace {

// Level 3 is zstd's default: ~8.5x on cubins and fast enough to run after every JIT build (docs/facts.md,
// "Embedded binaries and loads"); decompression speed barely depends on the level.
constexpr int kCompressionLevel = 3;

// Frame header descriptor bit of Content_Checksum_flag (RFC 8878, 3.1.1.1.1); read directly because
// ZSTD_getFrameHeader is not part of zstd's stable API.
constexpr unsigned char kZstdChecksumFlag = 0x04;
constexpr std::string_view kZstdMagic{"\x28\xb5\x2f\xfd", 4};  // 0xFD2FB528 little-endian; not a skippable frame
// Every zstd block has a 3-byte header and decompresses to at most 128 KiB, which bounds what a frame
// of n bytes can honestly claim to hold; a bigger claim is rejected before anything is allocated.
constexpr std::uint64_t kZstdBlockHeaderSize = 3;
constexpr std::uint64_t kZstdMaxBlockContent = 128 * 1024;

template <typename T>
void put(std::string& out, T value) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));
  out.append(bytes, sizeof(T));
}

void put_str(std::string& out, std::string_view s) {
  if (s.size() > UINT32_MAX) throw Error(Errc::invalid_argument, "kiln: a cache entry field is larger than 4 GiB");
  put(out, static_cast<std::uint32_t>(s.size()));
  out += s;
}

// Sequential reads over untrusted bytes; each read checks the remaining length first.
class Reader {
 public:
  explicit Reader(std::string_view bytes) : rest_(bytes) {}

  template <typename T>
  std::optional<T> get() {
    if (rest_.size() < sizeof(T)) return std::nullopt;
    T value;
    std::memcpy(&value, rest_.data(), sizeof(T));
    rest_.remove_prefix(sizeof(T));
    return value;
  }

  std::optional<std::string_view> str() {
    const auto size = get<std::uint32_t>();
    if (!size || rest_.size() < *size) return std::nullopt;
    const std::string_view s = rest_.substr(0, *size);
    rest_.remove_prefix(*size);
    return s;
  }

  std::size_t left() const noexcept { return rest_.size(); }

 private:
  std::string_view rest_;
};

std::string sm(unsigned arch) { return "sm_" + std::to_string(arch); }

struct ZstdCCtxDeleter {
  void operator()(ZSTD_CCtx* c) const noexcept { ZSTD_freeCCtx(c); }
};

std::string zstd_error(std::size_t code) {
  if (ZSTD_getErrorCode(code) == ZSTD_error_checksum_wrong) return "zstd: checksum wrong";
  return std::string("zstd: ") + ZSTD_getErrorName(code);
}

}  // namespace

std::string encode_payload(const CacheEntry& entry) {
  std::size_t binaries = entry.cubin.size();
  for (const CachedImage& part : entry.parts) binaries += part.cubin.size() + 4 * part.kernels.size() + 8;
  std::string out;
  out.reserve(64 + entry.options.size() + entry.compiler.size() + binaries + 132 * entry.kernels.size());
  put<std::uint32_t>(out, entry.arch);
  put(out, static_cast<std::uint32_t>(entry.kernels.size()));
  for (const CachedKernel& k : entry.kernels) {
    put_str(out, k.name);
    put_str(out, k.lowered);
  }
  put_str(out, entry.options);
  put_str(out, entry.compiler);
  if (entry.parts.empty()) {  // one image of every kernel
    put<std::uint32_t>(out, 1);
    put(out, static_cast<std::uint32_t>(entry.kernels.size()));
    for (std::uint32_t i = 0; i < entry.kernels.size(); ++i) put(out, i);
    put_str(out, entry.cubin);
    return out;
  }
  put(out, static_cast<std::uint32_t>(entry.parts.size()));
  for (const CachedImage& part : entry.parts) {
    put(out, static_cast<std::uint32_t>(part.kernels.size()));
    for (const std::uint32_t i : part.kernels) put(out, i);
    put_str(out, part.cubin);
  }
  return out;
}

Result<CacheEntry> parse_payload(std::string_view payload) {
  CacheEntry r;
  Reader in(payload);
  const auto arch = in.get<std::uint32_t>();
  const auto count = in.get<std::uint32_t>();
  if (!arch || !count) return fail("payload: truncated before the kernel list");
  r.arch = *arch;
  // No reserve(count): the count is untrusted, and each kernel must prove itself with its bytes.
  for (std::uint32_t i = 0; i < *count; ++i) {
    const auto name = in.str();
    const auto lowered = name ? in.str() : std::nullopt;
    if (!lowered) return fail("payload: truncated in kernel " + std::to_string(i) + " of " + std::to_string(*count));
    r.kernels.push_back({std::string(*name), std::string(*lowered)});
  }
  const auto options = in.str();
  const auto compiler = options ? in.str() : std::nullopt;
  const auto images = compiler ? in.get<std::uint32_t>() : std::nullopt;
  if (!images) return fail("payload: truncated in the options, compiler or image count");
  r.options = *options;
  r.compiler = *compiler;
  if (*images == 0) return fail("payload: no image");
  // Each image proves itself with its bytes before the next is read: a count claims nothing.
  for (std::uint32_t i = 0; i < *images; ++i) {
    const std::string where = "image " + std::to_string(i) + " of " + std::to_string(*images);
    CachedImage image;
    const auto kernels = in.get<std::uint32_t>();
    if (!kernels) return fail("payload: truncated in " + where);
    if (*kernels > r.kernels.size())
      return fail("payload: " + where + " claims " + std::to_string(*kernels) + " kernels of " +
                  std::to_string(r.kernels.size()));
    for (std::uint32_t k = 0; k < *kernels; ++k) {
      const auto index = in.get<std::uint32_t>();
      if (!index) return fail("payload: truncated in " + where);
      image.kernels.push_back(*index);
    }
    const auto cubin = in.str();
    if (!cubin) return fail("payload: truncated in the cubin of " + where);
    image.cubin = *cubin;
    r.parts.push_back(std::move(image));
  }
  if (in.left() != 0) return fail("payload: " + std::to_string(in.left()) + " bytes after the last cubin");
  if (r.parts.size() == 1) {  // a unit compiled whole; check_entry sees that it holds every kernel
    if (r.parts[0].kernels.size() != r.kernels.size())
      return fail("payload: its one image holds " + std::to_string(r.parts[0].kernels.size()) + " of its " +
                  std::to_string(r.kernels.size()) + " kernels");
    for (std::uint32_t k = 0; k < r.kernels.size(); ++k)
      if (r.parts[0].kernels[k] != k) return fail("payload: its one image lists its kernels out of order");
    r.cubin = std::move(r.parts[0].cubin);
    r.parts.clear();
  }
  return r;
}

std::string compress_frame(std::string_view payload) {
  const std::unique_ptr<ZSTD_CCtx, ZstdCCtxDeleter> cctx(ZSTD_createCCtx());
  if (!cctx) throw std::bad_alloc();
  ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_compressionLevel, kCompressionLevel);
  ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_checksumFlag, 1);
  ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_contentSizeFlag, 1);
  std::string frame(ZSTD_compressBound(payload.size()), '\0');
  const std::size_t size = ZSTD_compress2(cctx.get(), frame.data(), frame.size(), payload.data(), payload.size());
  if (ZSTD_isError(size)) throw Error(Errc::cache, "kiln: compressing a cache entry failed: " + zstd_error(size));
  frame.resize(size);
  return frame;
}

Result<std::string> decompress_frame(std::string_view frame) {
  if (!frame.starts_with(kZstdMagic)) return fail("zstd: not a zstd data frame");
  const std::size_t frame_size = ZSTD_findFrameCompressedSize(frame.data(), frame.size());
  if (ZSTD_isError(frame_size)) return fail(zstd_error(frame_size));
  if (frame_size != frame.size())
    return fail("zstd: " + std::to_string(frame.size() - frame_size) + " bytes after the frame");
  // A whole frame was found, so it is at least magic + descriptor long.
  if ((static_cast<unsigned char>(frame[kZstdMagic.size()]) & kZstdChecksumFlag) == 0)
    return fail("zstd: frame has no content checksum");
  const unsigned long long content = ZSTD_getFrameContentSize(frame.data(), frame.size());
  if (content == ZSTD_CONTENTSIZE_UNKNOWN) return fail("zstd: frame does not record its content size");
  if (content == ZSTD_CONTENTSIZE_ERROR) return fail("zstd: unreadable frame header");
  // Refused before anything is allocated: a 30 KB frame can honestly claim a gigabyte of zeros.
  if (content > kMaxPayloadBytes)
    return fail("zstd: frame claims " + std::to_string(content) + " bytes of content, more than an entry may hold "
                "(the cap is " + std::to_string(kMaxPayloadBytes) + " bytes)");
  const std::uint64_t possible = (frame.size() / kZstdBlockHeaderSize + 1) * kZstdMaxBlockContent;
  if (content > possible)
    return fail("zstd: frame claims " + std::to_string(content) + " bytes of content, more than it can hold");
  std::string r(static_cast<std::size_t>(content), '\0');
  const std::size_t size = ZSTD_decompressDCtx(thread_zstd_dctx(), r.data(), r.size(), frame.data(), frame.size());
  if (ZSTD_isError(size)) return fail(zstd_error(size));
  if (size != content) return fail("zstd: frame holds " + std::to_string(size) + " bytes, header says " + std::to_string(content));
  return r;
}

namespace {

// One cubin of an entry: for `arch`, defining each of `kernels` (indices into entry.kernels, checked).
Status check_image(const CacheEntry& entry, std::string_view bytes, const std::vector<std::uint32_t>& kernels,
                   unsigned arch, const std::string& what) {
  const Cubin cubin = read_cubin(bytes);
  if (!cubin.ok()) return fail(what + ": " + cubin.error);
  if (cubin.arch != arch) return fail(what + " is for " + sm(cubin.arch) + ", key says " + sm(arch));
  for (const std::uint32_t i : kernels) {
    const CachedKernel& k = entry.kernels[i];
    if (!cubin.defines(k.lowered)) return fail(what + " lacks kernel " + k.name + " (symbol " + k.lowered + ")");
  }
  return ok();
}

}  // namespace

Status check_entry(const CacheEntry& entry, unsigned arch) {
  if (entry.arch != arch) return fail("payload is for " + sm(entry.arch) + ", key says " + sm(arch));
  if (entry.kernels.empty()) return fail("payload lists no kernels");
  for (const CachedKernel& k : entry.kernels)
    if (k.name.empty()) return fail("payload has a kernel without a name (lowered '" + k.lowered + "')");
  if (entry.parts.empty()) {
    std::vector<std::uint32_t> every(entry.kernels.size());
    for (std::uint32_t i = 0; i < every.size(); ++i) every[i] = i;
    return check_image(entry, entry.cubin, every, arch, "cubin");
  }
  if (!entry.cubin.empty()) return fail("payload has both a whole unit's cubin and parts");
  if (entry.parts.size() == 1) return fail("payload has one part: a unit compiled whole has its cubin");
  std::vector<bool> served(entry.kernels.size(), false);
  for (std::size_t p = 0; p < entry.parts.size(); ++p) {
    const std::string what = "cubin of part " + std::to_string(p);
    if (entry.parts[p].kernels.empty()) return fail(what + " holds no kernel");
    for (const std::uint32_t i : entry.parts[p].kernels) {
      if (i >= served.size()) return fail(what + " names kernel " + std::to_string(i) + " of " + std::to_string(served.size()));
      if (served[i]) return fail(what + " holds kernel " + entry.kernels[i].name + ", which another part holds");
      served[i] = true;
    }
    if (const Status image = check_image(entry, entry.parts[p].cubin, entry.parts[p].kernels, arch, what); !image)
      return image;
  }
  for (std::size_t i = 0; i < served.size(); ++i)
    if (!served[i]) return fail("no part holds kernel " + entry.kernels[i].name);
  return ok();
}

std::string encode_entry(const CacheKey& key, const CacheEntry& entry) {
  const std::string frame = compress_frame(encode_payload(entry));
  std::string out;
  out.reserve(kEntryHeaderSize + key.text.size() + frame.size());
  out += kEntryMagic;
  put<std::uint32_t>(out, kCacheFormatVersion);
  put<std::uint32_t>(out, 0);  // flags: none defined in this version
  put<std::uint64_t>(out, key.text.size());
  put<std::uint64_t>(out, frame.size());
  const auto digest = sha256(frame);
  out.append(reinterpret_cast<const char*>(digest.data()), digest.size());
  out += key.text;
  out += frame;
  return out;
}

Result<EntrySizes> read_entry_header(std::string_view header) {
  if (header.empty()) return fail("empty file");
  if (header.size() < kEntryHeaderSize) return fail("truncated header");
  if (header.substr(0, kEntryMagic.size()) != kEntryMagic) return fail("wrong magic");
  Reader in(header.substr(kEntryMagic.size(), kFrameDigestOffset - kEntryMagic.size()));
  const auto version = *in.get<std::uint32_t>();
  const auto flags = *in.get<std::uint32_t>();
  EntrySizes sizes;
  sizes.key_text = *in.get<std::uint64_t>();
  sizes.frame = *in.get<std::uint64_t>();
  if (version != kCacheFormatVersion)
    return fail("format version " + std::to_string(version) + ", expected " + std::to_string(kCacheFormatVersion));
  if (flags != 0) return fail("unknown flags " + std::to_string(flags));
  // Each within its cap, so that their sum cannot overflow and no reader allocates what a header claims.
  if (sizes.key_text > kMaxKeyTextBytes)
    return fail("key text of " + std::to_string(sizes.key_text) + " bytes is larger than an entry's may be (" +
                std::to_string(kMaxKeyTextBytes) + " bytes)");
  if (sizes.frame > kMaxFrameBytes)
    return fail("frame of " + std::to_string(sizes.frame) + " bytes is larger than an entry's may be (" +
                std::to_string(kMaxFrameBytes) + " bytes)");
  return sizes;
}

Status check_entry_size(const EntrySizes& sizes, std::uint64_t file_size) {
  if (file_size == sizes.file()) return ok();
  const std::string detail = " (key text " + std::to_string(sizes.key_text) + ", frame " + std::to_string(sizes.frame) +
                             ", file " + std::to_string(file_size) + " bytes)";
  if (file_size < sizes.file()) return fail("truncated: the header promises more bytes" + detail);
  return fail("bytes after the frame" + detail);
}

Result<EntryRegions> split_entry(std::string_view file) {
  const auto sizes = read_entry_header(file);
  if (!sizes) return fail(sizes.error());
  if (const Status whole = check_entry_size(*sizes, file.size()); !whole) return fail(whole.error());
  const std::uint64_t key_size = sizes->key_text;
  const std::string_view frame = file.substr(kEntryHeaderSize + key_size);
  const auto digest = sha256(frame);
  if (std::memcmp(digest.data(), file.data() + kFrameDigestOffset, digest.size()) != 0)
    return fail("frame checksum wrong (the SHA-256 of the zstd frame differs from the header's)");
  return EntryRegions{file.substr(0, kEntryHeaderSize), file.substr(kEntryHeaderSize, key_size), frame};
}

Result<CacheEntry> decode_entry(std::string_view file, const CacheKey& key) {
  const auto regions = split_entry(file);
  if (!regions) return fail(regions.error());
  if (regions->key_text != key.text) return fail("key mismatch");
  const auto payload = decompress_frame(regions->frame);
  if (!payload) return fail(payload.error());
  auto entry = parse_payload(*payload);
  if (!entry) return entry;
  if (const Status checked = check_entry(*entry, key.arch); !checked) return fail(checked.error());
  return entry;
}

std::filesystem::path entries_path(const std::filesystem::path& root) {
  return root / ("v" + std::to_string(kCacheFormatVersion));
}

}  // namespace kiln::detail
