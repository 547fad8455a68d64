// tests/cpu/cubin_elf.hpp — reads what the tests check in an embedded cubin: its ELF header and kernel symbols.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <set>
#include <span>
#include <string>

namespace kiln::test {

template <typename T>
std::optional<T> read_at(std::span<const unsigned char> bytes, std::size_t offset) {
  if (offset > bytes.size() || bytes.size() - offset < sizeof(T)) return std::nullopt;
  T value;
  std::memcpy(&value, bytes.data() + offset, sizeof(T));
  return value;
}

struct CubinHeader {
  bool elf64 = false;
  std::uint16_t machine = 0;  // 190 = EM_CUDA
  unsigned arch = 0;          // SM number, from e_flags bits 8-15
};

inline CubinHeader cubin_header(std::span<const unsigned char> b) {
  CubinHeader h;
  h.elf64 = b.size() >= 64 && std::memcmp(b.data(), "\x7f" "ELF", 4) == 0 && b[4] == 2;
  if (!h.elf64) return h;
  h.machine = *read_at<std::uint16_t>(b, 18);
  h.arch = (*read_at<std::uint32_t>(b, 48) >> 8) & 0xffu;
  return h;
}

// Names of the kernel entry points: STT_FUNC symbols flagged STO_CUDA_ENTRY (0x10).
inline std::set<std::string> cubin_kernels(std::span<const unsigned char> b) {
  std::set<std::string> names;
  auto shoff = read_at<std::uint64_t>(b, 40);
  auto shentsize = read_at<std::uint16_t>(b, 58);
  auto shnum = read_at<std::uint16_t>(b, 60);
  if (!shoff || !shentsize || !shnum) return names;
  auto section = [&](unsigned i, std::size_t field) { return *shoff + std::size_t{i} * *shentsize + field; };
  for (unsigned i = 0; i < *shnum; ++i) {
    if (read_at<std::uint32_t>(b, section(i, 4)) != 2u) continue;  // SHT_SYMTAB
    auto offset = *read_at<std::uint64_t>(b, section(i, 24));
    auto size = *read_at<std::uint64_t>(b, section(i, 32));
    auto link = *read_at<std::uint32_t>(b, section(i, 40));
    auto strings = *read_at<std::uint64_t>(b, section(link, 24));
    for (std::uint64_t s = offset; s + 24 <= offset + size; s += 24) {
      auto name = *read_at<std::uint32_t>(b, s);
      auto info = *read_at<std::uint8_t>(b, s + 4);
      auto other = *read_at<std::uint8_t>(b, s + 5);
      if ((info & 0xf) == 2 && (other & 0x10) && strings + name < b.size())
        names.emplace(reinterpret_cast<const char*>(b.data() + strings + name));
    }
  }
  return names;
}

}  // namespace kiln::test
