// Writes the fuzzer's seed corpus: valid entries, frames, payloads and cubins for the golden key.
#include <kiln/cache.hpp>
#include "chain/entry.hpp"
#include "cache_golden_input.hpp"

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  const kiln::CacheKey key = kiln::CacheKey::from(kiln::test::golden_key_fields());

  std::vector<kiln::CacheEntry> entries{kiln::test::golden_entry()};
  kiln::CacheEntry small = entries[0];
  small.kernels.resize(1);
  small.options.clear();
  small.cubin = kiln::test::fake_cubin(90, {small.kernels[0].lowered});
  entries.push_back(small);
  kiln::CacheEntry large = entries[0];
  large.cubin = kiln::test::fake_cubin(90, {large.kernels[0].lowered, large.kernels[1].lowered},
                                       kiln::test::golden_code(200000));
  entries.push_back(large);
  // A unit compiled in parts: a cubin per kernel.
  kiln::CacheEntry parted = entries[0];
  parted.cubin.clear();
  parted.parts = {{kiln::test::fake_cubin(90, {parted.kernels[1].lowered}), {1}},
                  {kiln::test::fake_cubin(90, {parted.kernels[0].lowered}), {0}}};
  entries.push_back(parted);

  int n = 0;
  const auto write = [&](const std::string& kind, const std::string& bytes) {
    const std::string path = dir + "/" + kind + "_" + std::to_string(n++);
    std::ofstream(path, std::ios::binary) << bytes;
  };
  for (const auto& e : entries) {
    write("entry", kiln::detail::encode_entry(key, e));
    write("payload", kiln::detail::encode_payload(e));
    write("frame", kiln::detail::compress_frame(kiln::detail::encode_payload(e)));
    if (!e.cubin.empty()) write("cubin", e.cubin);
    for (const auto& part : e.parts) write("cubin", part.cubin);
  }
  std::printf("wrote %d seeds to %s\n", n, dir.c_str());
  return 0;
}
