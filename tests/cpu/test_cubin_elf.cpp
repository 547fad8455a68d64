// The cubin reader: what it finds in a cubin, and what it refuses in hostile bytes.
#include <doctest/doctest.h>

#include "base/cubin_elf.hpp"
#include "fake_cubin.hpp"

#include <cstring>
#include <string>

using kiln::detail::read_cubin;
using kiln::test::fake_cubin;

namespace {

template <typename T>
void poke(std::string& bytes, std::size_t offset, T value) {
  std::memcpy(bytes.data() + offset, &value, sizeof(T));
}

template <typename T>
T peek(const std::string& bytes, std::size_t offset) {
  T value;
  std::memcpy(&value, bytes.data() + offset, sizeof(T));
  return value;
}

// Offsets in a fake cubin: its section headers are the last 4 x 64 bytes, the symbol table's is #2.
std::size_t section_header(const std::string& cubin, unsigned index) { return peek<std::uint64_t>(cubin, 40) + 64 * index; }

}  // namespace

TEST_CASE("a cubin's architecture and kernel entry points are read") {
  const auto cubin = read_cubin(fake_cubin(90, {"zeta", "_Z5alphav", "zeta"}, "code"));
  REQUIRE_MESSAGE(cubin.ok(), cubin.error);
  CHECK(cubin.arch == 90);
  CHECK(cubin.kernels == std::vector<std::string>{"_Z5alphav", "zeta"});
  CHECK(cubin.defines("zeta"));
  CHECK_FALSE(cubin.defines("zet"));
}

TEST_CASE("functions without the entry flag and other symbol types are not kernels") {
  std::string bytes = fake_cubin(80, {"entry", "device_fn", "data"});
  const std::size_t symbols = peek<std::uint64_t>(bytes, section_header(bytes, 2) + 24);
  poke<std::uint8_t>(bytes, symbols + 2 * 24 + 5, 0);     // device_fn: STT_FUNC, not STO_CUDA_ENTRY
  poke<std::uint8_t>(bytes, symbols + 3 * 24 + 4, 0x11);  // data: STT_OBJECT
  const auto cubin = read_cubin(bytes);
  REQUIRE(cubin.ok());
  CHECK(cubin.kernels == std::vector<std::string>{"entry"});
}

TEST_CASE("bytes that are not a 64-bit little-endian CUDA ELF are refused with the reason") {
  const std::string good = fake_cubin(90, {"k"});
  CHECK(read_cubin(std::string_view{}).error == "not an ELF file");
  CHECK(read_cubin(good.substr(0, 63)).error == "not an ELF file");
  std::string bytes = good;
  bytes[4] = 1;
  CHECK(read_cubin(bytes).error == "not a 64-bit ELF file");
  bytes = good;
  bytes[5] = 2;
  CHECK(read_cubin(bytes).error == "not a little-endian ELF file");
  bytes = good;
  poke<std::uint16_t>(bytes, 18, 62);
  CHECK(read_cubin(bytes).error == "ELF machine 62, expected 190 (EM_CUDA)");
  bytes = good;
  poke<std::uint32_t>(bytes, 48, 2);
  CHECK(read_cubin(bytes).error == "ELF flags name no SM architecture");
}

TEST_CASE("every truncation of a cubin is refused, and the refusal leaves the result empty") {
  const std::string good = fake_cubin(90, {"kernel_a", "kernel_b"}, std::string(100, 'x'));
  for (std::size_t size = 0; size < good.size(); ++size) {
    CAPTURE(size);
    const auto cubin = read_cubin(std::string_view(good).substr(0, size));
    CHECK_FALSE(cubin.ok());
    CHECK(cubin.kernels.empty());
  }
}

TEST_CASE("offsets and sizes that point outside the file are refused, not followed") {
  const std::string good = fake_cubin(90, {"kernel"});
  const std::size_t symtab = section_header(good, 2);
  const std::size_t symbols = peek<std::uint64_t>(good, symtab + 24);
  struct Case {
    const char* what;
    std::size_t offset;
    std::uint64_t value;
    unsigned width;
    const char* error_contains;
  };
  const Case cases[] = {
      {"section table offset near 2^64", 40, ~std::uint64_t{0} - 10, 8, "section header table"},
      {"section table past the end", 40, good.size() - 64, 8, "section header table"},
      {"section header size too small", 58, 16, 2, "section header size"},
      {"symbol table offset past the end", symtab + 24, good.size(), 8, "runs past the end"},
      {"symbol table size near 2^64", symtab + 32, ~std::uint64_t{0} - 23, 8, "multiple of 24"},
      {"symbol table size past the end", symtab + 32, 24 * 1000, 8, "runs past the end"},
      {"symbol entry size", symtab + 56, 16, 8, "entry size"},
      {"string table link out of range", symtab + 40, 99, 4, "not a string table"},
      {"string table link to itself", symtab + 40, 2, 4, "not a string table"},
      {"string table size past the end", section_header(good, 1) + 32, good.size(), 8, "string table runs past"},
      {"symbol name past the string table", symbols + 24, 4096, 4, "no NUL-terminated name"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.what);
    std::string bytes = good;
    if (c.width == 8) poke<std::uint64_t>(bytes, c.offset, c.value);
    if (c.width == 4) poke<std::uint32_t>(bytes, c.offset, static_cast<std::uint32_t>(c.value));
    if (c.width == 2) poke<std::uint16_t>(bytes, c.offset, static_cast<std::uint16_t>(c.value));
    const auto cubin = read_cubin(bytes);
    CHECK(cubin.error.find(c.error_contains) != std::string::npos);
  }
}

TEST_CASE("a kernel name without its NUL inside the string table is refused") {
  std::string bytes = fake_cubin(90, {"kernel"});
  const std::size_t strtab = section_header(bytes, 1);
  poke<std::uint64_t>(bytes, strtab + 32, 4);  // "\0ker": the name's NUL is now outside
  CHECK(read_cubin(bytes).error.find("no NUL-terminated name") != std::string::npos);
}

TEST_CASE("a second symbol table is refused") {
  std::string bytes = fake_cubin(90, {"kernel"});
  poke<std::uint32_t>(bytes, section_header(bytes, 3) + 4, 2);  // the PROGBITS section becomes SHT_SYMTAB
  CHECK(read_cubin(bytes).error == "ELF has more than one symbol table (sections 2 and 3)");
}
