// Bounds-checked reading of a cubin's ELF header and kernel entry symbols.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::detail {

inline constexpr unsigned kEmCuda = 190;            // e_machine of a CUDA device binary
inline constexpr unsigned kStoCudaEntry = 0x10;     // st_other flag of a kernel entry point

// What kiln needs to know about a cubin before the driver may see it.
struct Cubin {
  std::string error;                 // empty when the bytes are a readable cubin; else what is wrong
  unsigned arch = 0;                 // SM number from e_flags bits 8-15 (90 = sm_90)
  std::vector<std::string> kernels;  // names of STT_FUNC symbols flagged STO_CUDA_ENTRY, sorted, unique
  // Each kernel's code bytes (its symbol's st_size): how a unit's code is shared among its kernels, for
  // the JIT pool's cost of compiling it in parts.
  std::map<std::string, std::uint64_t, std::less<>> kernel_bytes;

  bool ok() const noexcept { return error.empty(); }
  bool defines(std::string_view kernel) const noexcept;
};

// Reads a 64-bit little-endian EM_CUDA ELF file. Every offset and size is checked against `bytes`,
// so hostile input (a corrupt cache file, the fuzzer) yields an error, never an out-of-bounds read.
Cubin read_cubin(std::span<const unsigned char> bytes);
Cubin read_cubin(std::string_view bytes);

}  // namespace kiln::detail
