// What untrusted bytes can make kiln allocate: an entry file costs its 64-byte header until the header
// checks out, a zstd frame claiming more than an entry can hold is refused before anything is allocated,
// and a JIT frame's buffer grows with the bytes that arrive, not with what its header claims.
#include <kiln/cache.hpp>
#include <doctest/doctest.h>

#include "cache_test_util.hpp"
#include "chain/entry.hpp"
#include "chain/key.hpp"
#include "jit/protocol.hpp"
#include "memory_limit.hpp"
#include "text_util.hpp"

#include <fcntl.h>
#include <unistd.h>
#include <zstd.h>

#include <cstring>
#include <memory>

using kiln::test::ChildChecks;
using kiln::test::entry_path;
using kiln::test::sample_entry;
using kiln::test::sample_key;
using kiln::test::sparse_file;

namespace {

using kiln::test::kMiB;


template <typename T>
void put(std::string& out, T value) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));
  out.append(bytes, sizeof(T));
}

// An entry header (chain/entry.hpp) promising `key_size` and `frame_size` bytes, with the digest of `frame`.
std::string entry_header(std::uint64_t key_size, std::uint64_t frame_size, std::string_view frame = {}) {
  std::string h(kiln::detail::kEntryMagic);
  put<std::uint32_t>(h, kiln::kCacheFormatVersion);
  put<std::uint32_t>(h, 0);
  put<std::uint64_t>(h, key_size);
  put<std::uint64_t>(h, frame_size);
  const auto digest = kiln::detail::sha256(frame);
  h.append(reinterpret_cast<const char*>(digest.data()), digest.size());
  return h;
}

// A real zstd bomb: a frame of ~30 KB that decompresses to `content` zero bytes, made by streaming (so
// making it costs no memory either), with its content size and checksum recorded.
std::string zstd_bomb(std::uint64_t content) {
  const std::unique_ptr<ZSTD_CCtx, decltype(&ZSTD_freeCCtx)> c(ZSTD_createCCtx(), ZSTD_freeCCtx);
  ZSTD_CCtx_setParameter(c.get(), ZSTD_c_compressionLevel, 1);
  ZSTD_CCtx_setParameter(c.get(), ZSTD_c_checksumFlag, 1);
  ZSTD_CCtx_setPledgedSrcSize(c.get(), content);
  const std::string zeros(kMiB, '\0');
  std::string frame, buffer(ZSTD_CStreamOutSize(), '\0');
  for (std::uint64_t fed = 0; fed < content;) {
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(zeros.size(), content - fed));
    fed += n;
    const ZSTD_EndDirective mode = fed == content ? ZSTD_e_end : ZSTD_e_continue;
    ZSTD_inBuffer in{zeros.data(), n, 0};
    for (int rounds = 0; rounds < 1000; ++rounds) {
      ZSTD_outBuffer out{buffer.data(), buffer.size(), 0};
      const std::size_t left = ZSTD_compressStream2(c.get(), &out, &in, mode);
      if (ZSTD_isError(left)) return {};  // the caller's size check fails
      frame.append(buffer.data(), out.pos);
      if (mode == ZSTD_e_end ? left == 0 : in.pos == in.size) break;
    }
  }
  return frame;
}

}  // namespace

TEST_CASE("a sparse 1 GiB - 1 file at an entry name costs its 64-byte header: refused, deleted, nothing allocated") {
  kiln::test::TempDir tmp;
  { kiln::DiskCache make(kiln::test::config_at(tmp.path())); }
  const auto path = entry_path(tmp.path(), sample_key(1));
  sparse_file(path, "", (std::uint64_t{1} << 30) - 1);
  const int status = kiln::test::run_with_memory_headroom(256 * kMiB, [&] {
    ChildChecks checks;
    kiln::DiskCache cache(kiln::test::config_at(tmp.path()));
    checks.expect(!cache.load(sample_key(1)).has_value(), "a miss");
    checks.expect(cache.stats().corrupt == 1, "counted as corrupt");
    checks.expect(!cache.warnings().empty() && cache.warnings()[0].find("wrong magic") != std::string::npos,
                  "says why: " + (cache.warnings().empty() ? std::string() : cache.warnings()[0]));
    checks.expect(!std::filesystem::exists(path), "deleted");
    return checks.exit_code();
  });
  CHECK(status == 0);
}

TEST_CASE("an entry header promising more than any entry holds is refused before the rest is read") {
  kiln::test::TempDir tmp;
  { kiln::DiskCache make(kiln::test::config_at(tmp.path())); }
  const kiln::CacheKey key = sample_key(1);
  const auto path = entry_path(tmp.path(), key);
  // A frame of 100 MiB: more than kMaxFrameBytes, and the file really is that long (a hole).
  const std::uint64_t frame = 100 * kMiB;
  sparse_file(path, entry_header(key.text.size(), frame) + key.text, 64 + key.text.size() + frame);
  const int status = kiln::test::run_with_memory_headroom(32 * kMiB, [&] {
    ChildChecks checks;
    kiln::DiskCache cache(kiln::test::config_at(tmp.path()));
    checks.expect(!cache.load(key).has_value(), "a miss");
    const std::string warning = cache.warnings().empty() ? std::string() : cache.warnings()[0];
    checks.expect(warning.find("larger than") != std::string::npos && warning.find("104857600") != std::string::npos,
                  "names the size and the cap: " + warning);
    checks.expect(!std::filesystem::exists(path), "deleted");
    return checks.exit_code();
  });
  CHECK(status == 0);

  // A header whose sizes do not add up to the file's is refused from the header and the file's size.
  kiln::DiskCache cache(kiln::test::config_at(tmp.path()));
  REQUIRE(cache.store(key, sample_entry(1)));
  std::string good = kiln::test::read_bytes(path);
  kiln::test::write_bytes(path, good + "tail");
  CHECK_FALSE(cache.load(key).has_value());
  CHECK(cache.warnings().back().find("bytes after the frame") != std::string::npos);
}

TEST_CASE("a real zstd bomb (30 KB holding 1,000,000,000 bytes) is refused before anything is allocated") {
  const std::string bomb = zstd_bomb(1'000'000'000);
  REQUIRE(!bomb.empty());
  CHECK(bomb.size() < 64 * 1024);
  CHECK(ZSTD_getFrameContentSize(bomb.data(), bomb.size()) == 1'000'000'000ull);
  const kiln::CacheKey key = sample_key(1);
  const std::string file = entry_header(key.text.size(), bomb.size(), bomb) + key.text + bomb;
  const int status = kiln::test::run_with_memory_headroom(256 * kMiB, [&] {
    ChildChecks checks;
    const auto payload = kiln::detail::decompress_frame(bomb);
    checks.expect(!payload.ok() && payload.error().find("1000000000") != std::string::npos &&
                      payload.error().find("cap") != std::string::npos,
                  "refused, naming the claim and the cap: " + payload.error());
    const auto entry = kiln::detail::decode_entry(file, key);  // past the frame digest: a valid file
    checks.expect(!entry.ok(), "the entry holding it is refused too");
    return checks.exit_code();
  });
  CHECK(status == 0);
}

TEST_CASE("a JIT frame header claiming 1 GiB - 1 is refused; one claiming 100 MiB costs only the bytes that arrive") {
  const auto header = [](std::uint64_t size) {
    std::string h;
    put<std::uint32_t>(h, kiln::detail::kJitMagic);
    put<std::uint32_t>(h, kiln::detail::kJitProtocolVersion);
    put<std::uint64_t>(h, size);
    return h;
  };
  // What read_frame makes of `bytes` sent down a pipe that then closes.
  const auto read_sent = [](const std::string& bytes) {
    kiln::detail::FrameRead r;
    int p[2];
    if (::pipe(p) != 0) return r;
    (void)!::write(p[1], bytes.data(), bytes.size());
    ::close(p[1]);
    r = kiln::detail::read_frame(p[0]);
    ::close(p[0]);
    return r;
  };
  const int status = kiln::test::run_with_memory_headroom(32 * kMiB, [&] {
    ChildChecks checks;
    const auto huge = read_sent(header((std::uint64_t{1} << 30) - 1));
    checks.expect(huge.status == kiln::detail::IoStatus::error && huge.error.find("larger than") != std::string::npos,
                  "refused from its header: " + huge.error);
    const auto cut = read_sent(header(100 * kMiB) + std::string(1000, 'x'));
    checks.expect(cut.status == kiln::detail::IoStatus::error && cut.error.find("stream ended after 1000 of") != std::string::npos,
                  "a stream cut short after 1000 bytes, without allocating 100 MiB: " + cut.error);
    return checks.exit_code();
  });
  CHECK(status == 0);
}
