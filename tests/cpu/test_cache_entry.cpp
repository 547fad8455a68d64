// The entry codec: round trip, and every kind of damage rejected with its reason.
#include <doctest/doctest.h>

#include <kiln/cache.hpp>
#include <kiln/catalog.hpp>

#include "chain/entry.hpp"
#include "cache_golden_input.hpp"
#include "chain/key.hpp"
#include "cache_test_util.hpp"
#include "examples_catalog.hpp"

#include <cstring>
#include <random>
#include <string>

using kiln::detail::decode_entry;
using kiln::detail::encode_entry;
using kiln::detail::kEntryHeaderSize;
using kiln::detail::kMaxFrameBytes;

namespace {

// An entry holding a real nvcc cubin of the examples catalog (block_sum_f32, its first architecture).
struct RealEntry {
  kiln::CacheKey key;
  kiln::CacheEntry entry;
};

RealEntry real_entry() {
  const kiln::Catalog& c = kiln::examples::catalog();
  const kiln::KernelEntry* k = c.find("block_sum_f32");
  REQUIRE(k != nullptr);
  const kiln::BinaryEntry& binary = c.binaries_of(c.units[k->unit]).front();
  REQUIRE(binary.kind == kiln::BinaryKind::cubin);
  auto fields = kiln::test::golden_key_fields();
  fields.arch = binary.arch;
  RealEntry r{kiln::CacheKey::from(fields), {}};
  r.entry.arch = binary.arch;
  r.entry.kernels = {{std::string(c.str(k->name)), std::string(c.str(k->lowered))}};
  r.entry.options = std::string(c.str(c.units[k->unit].options));
  r.entry.compiler = "nvcc";
  r.entry.cubin = c.image(binary);
  return r;
}

template <typename T>
void poke(std::string& bytes, std::size_t offset, T value) {
  std::memcpy(bytes.data() + offset, &value, sizeof(T));
}

// Rewrites the frame digest in the header, as if the damage had been done before writing: reaches zstd's checks.
void reseal(std::string& file, const kiln::CacheKey& key) {
  const auto digest = kiln::detail::sha256(std::string_view(file).substr(kEntryHeaderSize + key.text.size()));
  std::memcpy(file.data() + kiln::detail::kFrameDigestOffset, digest.data(), digest.size());
}

std::string rejection(std::string_view file, const kiln::CacheKey& key) {
  const auto decoded = decode_entry(file, key);
  return decoded.ok() ? "accepted" : decoded.error();
}

// An entry file around a payload that encode_entry would never write.
std::string file_with_payload(const kiln::CacheKey& key, const std::string& payload) {
  kiln::CacheEntry empty;
  std::string file = encode_entry(key, empty);
  const std::string frame = kiln::detail::compress_frame(payload);
  file.resize(kEntryHeaderSize + key.text.size());
  poke<std::uint64_t>(file, 24, frame.size());
  file += frame;
  reseal(file, key);
  return file;
}

}  // namespace

TEST_CASE("an entry with a real cubin decodes to what was encoded") {
  const auto [key, entry] = real_entry();
  const std::string file = encode_entry(key, entry);
  CHECK(file.substr(0, 8) == kiln::detail::kEntryMagic);
  CHECK(file.substr(kEntryHeaderSize, key.text.size()) == key.text);  // readable with `head`
  const auto decoded = decode_entry(file, key);
  REQUIRE_MESSAGE(decoded.ok(), decoded.error());
  CHECK(kiln::test::same_entry((*decoded), entry));
  MESSAGE("real cubin " << entry.cubin.size() << " bytes, entry file " << file.size() << " bytes");
}

TEST_CASE("every truncation of a real entry is rejected") {
  const auto [key, entry] = real_entry();
  const std::string file = encode_entry(key, entry);
  for (std::size_t size = 0; size < file.size(); ++size) {
    CAPTURE(size);
    const std::string why = rejection(std::string_view(file).substr(0, size), key);
    if (size == 0) {
      CHECK(why == "empty file");
    } else if (size < kEntryHeaderSize) {
      CHECK(why == "truncated header");
    } else {
      CHECK(why.starts_with("truncated: the header promises more bytes"));
    }
  }
}

TEST_CASE("a bit flipped anywhere is rejected, with a reason that fits the region") {
  const auto [key, entry] = real_entry();
  const std::string file = encode_entry(key, entry);
  const std::size_t frame_start = kEntryHeaderSize + key.text.size();
  std::mt19937 rng(12345);
  std::size_t flips = 0;
  const auto flip = [&](std::size_t byte) {
    std::string bad = file;
    bad[byte] = static_cast<char>(bad[byte] ^ (1u << (rng() % 8)));
    ++flips;
    return rejection(bad, key);
  };
  for (std::size_t byte = 0; byte < kEntryHeaderSize; ++byte) {
    CAPTURE(byte);
    const std::string why = flip(byte);
    if (byte < 8) CHECK(why == "wrong magic");
    if (byte >= 8 && byte < 12) CHECK(why.starts_with("format version "));
    if (byte >= 12 && byte < 16) CHECK(why.starts_with("unknown flags "));
    if (byte >= 16 && byte < 32)
      CHECK((why.starts_with("truncated: ") || why.starts_with("bytes after the frame") ||
             why.find("is larger than an entry's may be") != std::string::npos));
    if (byte >= 32) CHECK(why.starts_with("frame checksum wrong"));
  }
  for (std::size_t byte = kEntryHeaderSize; byte < frame_start; ++byte) CHECK(flip(byte) == "key mismatch");
  // Every byte of the frame when small, else 2,000 spread over it: zstd's own header, blocks, checksum.
  const std::size_t frame_size = file.size() - frame_start;
  const std::size_t step = std::max<std::size_t>(1, frame_size / 2000);
  for (std::size_t byte = frame_start; byte < file.size(); byte += step) {
    CAPTURE(byte - frame_start);
    CHECK(flip(byte).starts_with("frame checksum wrong"));
  }
  MESSAGE(flips << " single-bit flips rejected");
}

TEST_CASE("behind the frame digest, zstd's content checksum and decoder still reject damage") {
  const auto [key, entry] = real_entry();
  const std::string file = encode_entry(key, entry);
  const std::size_t frame_start = kEntryHeaderSize + key.text.size();
  std::mt19937 rng(777);
  std::size_t accepted_same = 0;
  for (std::size_t byte = frame_start; byte < file.size(); byte += 7) {
    CAPTURE(byte - frame_start);
    std::string bad = file;
    bad[byte] = static_cast<char>(bad[byte] ^ (1u << (rng() % 8)));
    reseal(bad, key);
    const auto decoded = decode_entry(bad, key);
    if (decoded.ok()) {
      // A flip in bits the decoder never reads: the payload is intact (content checksum), so harmless.
      CHECK(kiln::test::same_entry((*decoded), entry));
      ++accepted_same;
    } else {
      CHECK((decoded.error().starts_with("zstd: ") || decoded.error().starts_with("payload")));
    }
  }
  std::string bad = file;
  bad[bad.size() - 1] ^= 1;  // the last 4 bytes are zstd's content checksum
  reseal(bad, key);
  CHECK(rejection(bad, key) == "zstd: checksum wrong");
  MESSAGE(accepted_same << " flips decoded to the identical payload (unused bits of compressed blocks)");
}

TEST_CASE("wrong magic, version, flags, key, or extra bytes are rejected by name") {
  const auto key = kiln::test::sample_key(1);
  const std::string good = encode_entry(key, kiln::test::sample_entry(1));
  std::string bad = good;
  bad[1] = 'X';
  CHECK(rejection(bad, key) == "wrong magic");
  CHECK(rejection("not a kiln entry file, just some text, long enough to fill a whole header of 64 bytes", key) == "wrong magic");
  bad = good;
  poke<std::uint32_t>(bad, 8, kiln::kCacheFormatVersion + 1);
  CHECK(rejection(bad, key) == "format version " + std::to_string(kiln::kCacheFormatVersion + 1) + ", expected " +
                                   std::to_string(kiln::kCacheFormatVersion));
  bad = good;
  poke<std::uint32_t>(bad, 12, 1);
  CHECK(rejection(bad, key) == "unknown flags 1");
  CHECK(rejection(good, kiln::test::sample_key(2)) == "key mismatch");
  CHECK(rejection(good + "x", key).starts_with("bytes after the frame"));
  bad = good;
  poke<std::uint64_t>(bad, 16, ~std::uint64_t{0});  // sizes that would overflow when added: past the cap
  CHECK(rejection(bad, key).starts_with("key text of 18446744073709551615 bytes is larger than an entry's may be"));
  bad = good;
  poke<std::uint64_t>(bad, 24, kMaxFrameBytes + 1);
  CHECK(rejection(bad, key).starts_with("frame of " + std::to_string(kMaxFrameBytes + 1) + " bytes is larger than"));
  bad = good;
  poke<std::uint64_t>(bad, 24, kMaxFrameBytes);  // within the cap, but more than the file holds
  CHECK(rejection(bad, key).starts_with("truncated: "));
}

TEST_CASE("a frame without its checksum, or followed by another frame, is rejected") {
  const auto key = kiln::test::sample_key(1);
  const std::string good = encode_entry(key, kiln::test::sample_entry(1));
  const std::size_t frame_start = kEntryHeaderSize + key.text.size();
  std::string bad = good;
  bad[frame_start + 4] = static_cast<char>(bad[frame_start + 4] & ~0x04);  // clear Content_Checksum_flag
  bad.resize(bad.size() - 4);
  poke<std::uint64_t>(bad, 24, bad.size() - frame_start);
  reseal(bad, key);
  CHECK(rejection(bad, key) == "zstd: frame has no content checksum");

  const std::string frame = good.substr(frame_start);
  bad = good + frame;
  poke<std::uint64_t>(bad, 24, 2 * frame.size());
  reseal(bad, key);
  CHECK(rejection(bad, key) == "zstd: " + std::to_string(frame.size()) + " bytes after the frame");
}

TEST_CASE("a payload must parse exactly, and its cubin must match the key and the kernels") {
  const auto key = kiln::test::sample_key(3);
  const kiln::CacheEntry entry = kiln::test::sample_entry(3);
  const std::string payload = kiln::detail::encode_payload(entry);
  CHECK(rejection(file_with_payload(key, payload), key) == "accepted");
  CHECK(rejection(file_with_payload(key, payload + "z"), key) == "payload: 1 bytes after the last cubin");
  CHECK(rejection(file_with_payload(key, payload.substr(0, 6)), key) == "payload: truncated before the kernel list");
  CHECK(rejection(file_with_payload(key, payload.substr(0, 20)), key) == "payload: truncated in kernel 0 of 2");
  CHECK(rejection(file_with_payload(key, payload.substr(0, payload.size() - 1)), key) ==
        "payload: truncated in the cubin of image 0 of 1");
  std::string huge_count = payload;
  poke<std::uint32_t>(huge_count, 4, 0xffffffffu);  // must fail on the bytes, not allocate 4G kernels
  const std::string why = rejection(file_with_payload(key, huge_count), key);
  CHECK(why.starts_with("payload: truncated in kernel "));
  CHECK(why.ends_with(" of 4294967295"));

  const auto with = [&](auto change) {
    kiln::CacheEntry changed = entry;
    change(changed);
    return rejection(file_with_payload(key, kiln::detail::encode_payload(changed)), key);
  };
  CHECK(with([](auto& e) { e.arch = 80; }) == "payload is for sm_80, key says sm_90");
  CHECK(with([](auto& e) { e.cubin = kiln::test::fake_cubin(80, {e.kernels[0].lowered, e.kernels[1].lowered}); }) ==
        "cubin is for sm_80, key says sm_90");
  CHECK(with([](auto& e) { e.kernels[1].lowered = "missing_symbol"; }) == "cubin lacks kernel scan3 (symbol missing_symbol)");
  CHECK(with([](auto& e) { e.kernels.clear(); }) == "payload lists no kernels");
  CHECK(with([](auto& e) { e.cubin = "\x7f" "ELF"; }) == "cubin: not an ELF file");
  CHECK(with([](auto& e) { e.kernels[0].name.clear(); }).starts_with("payload has a kernel without a name"));
}

TEST_CASE("an entry of several images round-trips, each image with its kernels") {
  const auto key = kiln::test::sample_key(4);
  const kiln::CacheEntry entry = kiln::test::sample_parted_entry(4);
  const auto decoded = decode_entry(encode_entry(key, entry), key);
  REQUIRE_MESSAGE(decoded.ok(), decoded.error());
  CHECK(kiln::test::same_entry(*decoded, entry));
  CHECK(decoded->cubin.empty());
  REQUIRE(decoded->parts.size() == 2);
  CHECK(decoded->parts[0].kernels == std::vector<std::uint32_t>{1});
  // A whole unit's entry stays one cubin, not one part.
  const kiln::CacheEntry whole = kiln::test::sample_entry(4);
  const auto again = decode_entry(encode_entry(key, whole), key);
  REQUIRE(again.ok());
  CHECK(again->parts.empty());
  CHECK(again->cubin == whole.cubin);
}

TEST_CASE("an entry's parts must hold each kernel once, in a cubin that defines it") {
  const auto key = kiln::test::sample_key(5);
  const kiln::CacheEntry entry = kiln::test::sample_parted_entry(5);
  const auto with = [&](auto change) {
    kiln::CacheEntry changed = entry;
    change(changed);
    return rejection(file_with_payload(key, kiln::detail::encode_payload(changed)), key);
  };
  CHECK(with([](auto&) {}) == "accepted");
  CHECK(with([](auto& e) { e.parts[1].kernels = {1}; }) == "cubin of part 1 holds kernel scan5, which another part holds");
  CHECK(with([](auto& e) { e.parts[1].kernels = {7}; }) == "cubin of part 1 names kernel 7 of 2");
  CHECK(with([](auto& e) { e.parts[1].kernels.clear(); }) == "cubin of part 1 holds no kernel");
  CHECK(with([](auto& e) { e.parts[0].kernels = {0}; }) == "cubin of part 0 lacks kernel k5 (symbol _Z2k5v)");
  CHECK(with([](auto& e) { e.parts[0].cubin = kiln::test::fake_cubin(80, {e.kernels[1].lowered}); }) ==
        "cubin of part 0 is for sm_80, key says sm_90");
  CHECK(with([](auto& e) { e.parts.pop_back(); }) == "payload: its one image holds 1 of its 2 kernels");
  CHECK(with([](auto& e) {
          e.parts.push_back({kiln::test::fake_cubin(90, {e.kernels[1].lowered}), {}});
        }) == "cubin of part 2 holds no kernel");
  // A count larger than the kernels is refused before any index is read.
  std::string payload = kiln::detail::encode_payload(entry);
  const std::string parts = kiln::detail::encode_payload([&] {
    kiln::CacheEntry e = entry;
    e.parts.clear();
    return e;
  }());
  // The image count sits where the whole entry's payload has its own: 4 bytes before its first image.
  const std::size_t first_image = parts.size() - entry.cubin.size() - 4 - 4 * entry.kernels.size() - 4;
  poke<std::uint32_t>(payload, first_image, 1000);
  CHECK(rejection(file_with_payload(key, payload), key) == "payload: image 0 of 2 claims 1000 kernels of 2");
  poke<std::uint32_t>(payload, first_image - 4, 0);
  CHECK(rejection(file_with_payload(key, payload), key) == "payload: no image");
}
