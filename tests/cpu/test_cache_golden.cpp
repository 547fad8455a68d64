// The committed golden entry pins the format: a change without a version bump fails here.
#include <kiln/cache.hpp>
#include <doctest/doctest.h>

#include "chain/entry.hpp"
#include "cache_golden_input.hpp"
#include "cache_test_util.hpp"

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

// KILN_TEST_GOLDEN_DIR: tests/cpu/golden in the source tree. To write the golden entry of a new format version:
//   KILN_UPDATE_GOLDEN=1 build/tests/test_cpu -tc='the golden entry*'
namespace {

std::filesystem::path golden_path(std::uint32_t version) {
  std::string name = "cache_entry_v";
  name += std::to_string(version);
  name += ".kiln";
  return std::filesystem::path(KILN_TEST_GOLDEN_DIR) / name;
}

bool updating() {
  const char* v = std::getenv("KILN_UPDATE_GOLDEN");
  return v != nullptr && std::strcmp(v, "1") == 0;
}

}  // namespace

TEST_CASE("the golden entry of this format version decodes to its fixed input, and encodes back to it") {
  const auto key = kiln::CacheKey::from(kiln::test::golden_key_fields());
  const auto input = kiln::test::golden_entry();
  const auto path = golden_path(kiln::kCacheFormatVersion);
  if (updating()) {
    kiln::test::write_bytes(path, kiln::detail::encode_entry(key, input));
    MESSAGE("KILN_UPDATE_GOLDEN=1: rewrote " << path.string());
  }
  INFO("If you changed the entry format, bump kCacheFormatVersion in kiln/cache.hpp and write the golden "
       "entry of the new version with KILN_UPDATE_GOLDEN=1 (keep the old ones); never rewrite an old version's.");
  REQUIRE_MESSAGE(std::filesystem::exists(path), "no golden entry for format version ", kiln::kCacheFormatVersion,
                  ": ", path.string());
  const std::string golden = kiln::test::read_bytes(path);

  const auto decoded = kiln::detail::decode_entry(golden, key);
  REQUIRE_MESSAGE(decoded.ok(), decoded.error());
  const kiln::CacheEntry& e = (*decoded);
  CHECK(e.arch == input.arch);
  REQUIRE(e.kernels.size() == input.kernels.size());
  for (std::size_t i = 0; i < e.kernels.size(); ++i) {
    CHECK(e.kernels[i].name == input.kernels[i].name);
    CHECK(e.kernels[i].lowered == input.kernels[i].lowered);
  }
  CHECK(e.options == input.options);
  CHECK(e.compiler == input.compiler);
  CHECK(e.cubin == input.cubin);

  // Byte for byte, except the compressed bytes themselves, which may differ between zstd versions.
  const std::string fresh = kiln::detail::encode_entry(key, input);
  const auto old_regions = kiln::detail::split_entry(golden);
  const auto new_regions = kiln::detail::split_entry(fresh);
  REQUIRE(old_regions.ok());
  REQUIRE(new_regions.ok());
  CHECK(old_regions->header.substr(0, 24) == new_regions->header.substr(0, 24));  // all but the frame's size and digest
  CHECK(old_regions->key_text == new_regions->key_text);
  const auto old_payload = kiln::detail::decompress_frame(old_regions->frame);
  REQUIRE(old_payload.ok());
  CHECK((*old_payload) == kiln::detail::encode_payload(input));
}

TEST_CASE("golden entries of older format versions are rejected as such") {
  const auto key = kiln::CacheKey::from(kiln::test::golden_key_fields());
  for (std::uint32_t version = 1; version < kiln::kCacheFormatVersion; ++version) {
    CAPTURE(version);
    const auto path = golden_path(version);
    REQUIRE_MESSAGE(std::filesystem::exists(path), "keep the golden entry of every format version: ", path.string());
    const auto decoded = kiln::detail::decode_entry(kiln::test::read_bytes(path), key);
    CHECK(decoded.error() == "format version " + std::to_string(version) + ", expected " +
                               std::to_string(kiln::kCacheFormatVersion));
  }
}
