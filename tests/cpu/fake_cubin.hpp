// Minimal cubin-shaped ELF files (header, symbol table, kernels) built in tests.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace kiln::test {

namespace fake_cubin_detail {
template <typename T>
void put(std::string& out, T value) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));
  out.append(bytes, sizeof(T));
}

inline void section_header(std::string& out, std::uint32_t type, std::uint64_t offset, std::uint64_t size,
                           std::uint32_t link, std::uint64_t entsize) {
  put<std::uint32_t>(out, 0);  // sh_name
  put<std::uint32_t>(out, type);
  put<std::uint64_t>(out, 0);  // sh_flags
  put<std::uint64_t>(out, 0);  // sh_addr
  put<std::uint64_t>(out, offset);
  put<std::uint64_t>(out, size);
  put<std::uint32_t>(out, link);
  put<std::uint32_t>(out, 0);  // sh_info
  put<std::uint64_t>(out, 8);  // sh_addralign
  put<std::uint64_t>(out, entsize);
}
}  // namespace fake_cubin_detail

// A 64-bit EM_CUDA ELF for sm_<arch> whose symbol table defines `kernels` as entry points (STT_FUNC,
// STO_CUDA_ENTRY), as tests/codegen/fake_elf.py lays it out; `code` becomes a PROGBITS section, so
// tests can make the file big or incompressible.
inline std::string fake_cubin(unsigned arch, const std::vector<std::string>& kernels, const std::string& code = {}) {
  using fake_cubin_detail::put;
  std::string strtab(1, '\0');
  std::string symtab(24, '\0');  // the null symbol
  for (const std::string& k : kernels) {
    put<std::uint32_t>(symtab, static_cast<std::uint32_t>(strtab.size()));
    put<std::uint8_t>(symtab, 0x12);  // STB_GLOBAL | STT_FUNC
    put<std::uint8_t>(symtab, 0x10);  // STO_CUDA_ENTRY
    put<std::uint16_t>(symtab, 0);
    put<std::uint64_t>(symtab, 0);
    put<std::uint64_t>(symtab, 0);
    strtab += k;
    strtab += '\0';
  }
  const std::uint64_t strtab_off = 64;
  const std::uint64_t symtab_off = strtab_off + strtab.size();
  const std::uint64_t code_off = symtab_off + symtab.size();
  const std::uint64_t shoff = code_off + code.size();

  std::string out("\x7f" "ELF\x02\x01\x01\x41\x08", 9);
  out.append(7, '\0');
  put<std::uint16_t>(out, 2);    // ET_EXEC
  put<std::uint16_t>(out, 190);  // EM_CUDA
  put<std::uint32_t>(out, 1);
  put<std::uint64_t>(out, 0);  // e_entry
  put<std::uint64_t>(out, 0);  // e_phoff
  put<std::uint64_t>(out, shoff);
  put<std::uint32_t>(out, 0x6000000u | (arch << 8) | 2u);
  put<std::uint16_t>(out, 64);  // e_ehsize
  put<std::uint16_t>(out, 0);   // e_phentsize
  put<std::uint16_t>(out, 0);   // e_phnum
  put<std::uint16_t>(out, 64);  // e_shentsize
  put<std::uint16_t>(out, 4);   // e_shnum
  put<std::uint16_t>(out, 1);   // e_shstrndx
  out += strtab;
  out += symtab;
  out += code;
  out.append(64, '\0');  // the null section
  fake_cubin_detail::section_header(out, 3, strtab_off, strtab.size(), 0, 0);   // SHT_STRTAB
  fake_cubin_detail::section_header(out, 2, symtab_off, symtab.size(), 1, 24);  // SHT_SYMTAB
  fake_cubin_detail::section_header(out, 1, code_off, code.size(), 0, 0);       // SHT_PROGBITS
  return out;
}

}  // namespace kiln::test
