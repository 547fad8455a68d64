// Cache keys: the readable text, its SHA-256, stability, and every field mattering.
#include <doctest/doctest.h>

#include <kiln/cache.hpp>

#include "cache_golden_input.hpp"
#include "chain/key.hpp"

#include <set>
#include <string>

TEST_CASE("the key text lists every field, one per line") {
  CHECK(kiln::test::golden_key_fields().text() ==
        "format=3\nregistry=examples\nunit=block_sum_f32\n"
        "source=9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08\n"
        "arch=sm_90\nnvrtc=13.0\nnvjitlink=13.0\ncccl=3.0.1\n");
}

TEST_CASE("the key is the SHA-256 of the text, in lowercase hex, the same on every machine") {
  CHECK(kiln::detail::sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  const auto key = kiln::CacheKey::from(kiln::test::golden_key_fields());
  // Computed independently: python3 -c 'import hashlib; print(hashlib.sha256(TEXT).hexdigest())'
  CHECK(key.hex == "ef61476e31eb233ecc66e2798884ab047e8de016d4fa33eb0f25676566b64be4");
  CHECK(key.text == kiln::test::golden_key_fields().text());
  CHECK(key.arch == 90);
}

TEST_CASE("changing any field changes the key") {
  const auto base = kiln::test::golden_key_fields();
  std::set<std::string> keys{kiln::CacheKey::from(base).hex};
  const auto with = [&](auto change) {
    auto fields = base;
    change(fields);
    keys.insert(kiln::CacheKey::from(fields).hex);
  };
  with([](auto& f) { f.registry = "other"; });
  with([](auto& f) { f.unit = "other"; });
  with([](auto& f) { f.source_digest[0] = '0'; });
  with([](auto& f) { f.arch = 80; });
  with([](auto& f) { f.nvrtc = "13.1"; });
  with([](auto& f) { f.nvjitlink = "13.1"; });
  with([](auto& f) { f.cccl = "3.1.0"; });
  with([](auto& f) { f.code_arch = 80; });
  CHECK(keys.size() == 9);
}

TEST_CASE("code compiled for an older architecture has a key of its own; code_arch = arch is no change") {
  // The PTX tier's binary from compute_80 PTX on sm_90 holds CUB's sm_80 policies: a plan must not take
  // it for the sm_90 build of the same unit (docs/DESIGN.md, "The PTX tier").
  auto fields = kiln::test::golden_key_fields();
  const std::string plain = fields.text();
  fields.code_arch = 90;
  CHECK(fields.text() == plain);
  fields.code_arch = 80;
  CHECK(fields.text() == plain + "code=compute_80\n");
  const auto rebuilt = kiln::detail::key_from_text(fields.text());
  REQUIRE(rebuilt);
  CHECK(rebuilt->arch == 90);
  CHECK(rebuilt->hex == kiln::CacheKey::from(fields).hex);
}

TEST_CASE("a field value cannot forge another field: line breaks and escapes are escaped") {
  auto forged = kiln::test::golden_key_fields();
  forged.unit = "u\narch=sm_80";
  CHECK(forged.text().find("unit=u\\x0aarch=sm_80\n") != std::string::npos);
  auto a = kiln::test::golden_key_fields();
  auto b = a;
  a.unit = "x\\x0a";  // the escaped form of b's value, written literally
  b.unit = "x\n";
  CHECK(a.text() != b.text());
}

TEST_CASE("a key is rebuilt from its stored text, as verify() does") {
  const auto key = kiln::CacheKey::from(kiln::test::golden_key_fields());
  const auto rebuilt = kiln::detail::key_from_text(key.text);
  REQUIRE(rebuilt);
  CHECK(rebuilt->hex == key.hex);
  CHECK(rebuilt->arch == 90);
  CHECK_FALSE(kiln::detail::key_from_text("format=1\nregistry=x\n"));
  CHECK_FALSE(kiln::detail::key_from_text("format=1\narch=sm_\n"));
  CHECK_FALSE(kiln::detail::key_from_text("format=1\narch=sm_90x\n"));
}
