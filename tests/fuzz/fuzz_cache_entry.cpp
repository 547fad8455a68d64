// LibFuzzer target: the cache entry decoder and the parsers behind its checksum.
#include "disk/entry.hpp"
#include "cache_golden_input.hpp"
#include "disk/key.hpp"
#include "base/cubin_elf.hpp"

#include <cstdint>
#include <cstdlib>
#include <string_view>

namespace {

void require(bool invariant) {
  if (!invariant) std::abort();  // a crash is what libFuzzer reports
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace kiln::detail;
  static const kiln::CacheKey key = kiln::CacheKey::from(kiln::test::golden_key_fields());
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);

  // What load() does with a file under a known key.
  const auto decoded = decode_entry(bytes, key);
  if (decoded.ok()) require(check_entry(*decoded, key.arch).ok());

  // What verify() does: the key comes from the file itself.
  if (const auto regions = split_entry(bytes); regions.ok()) {
    if (const auto own_key = key_from_text(regions->key_text)) (void)decode_entry(bytes, *own_key);
  }

  // Mutations of an entry do not get past the frame digest, so the zstd frame checks, the payload
  // parser and the ELF reader also get the raw bytes. A payload that parses must be in canonical form:
  // encoding it gives the input back.
  if (const auto payload = decompress_frame(bytes); payload.ok()) (void)parse_payload((*payload));
  (void)key_from_text(bytes);
  if (const auto payload = parse_payload(bytes); payload.ok()) {
    require(encode_payload((*payload)) == bytes);
    (void)check_entry(*payload, key.arch);
  }
  const Cubin cubin = read_cubin(bytes);
  if (cubin.ok()) {
    for (const auto& k : cubin.kernels) require(!k.empty() && cubin.defines(k));
  }
  return 0;
}
