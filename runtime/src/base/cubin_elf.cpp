// Parses just enough ELF to vouch for a cubin: class, machine, arch, kernel symbols.
#include "base/cubin_elf.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>

namespace kiln::detail {

namespace {

// ELF64 offsets and constants (System V gABI); only what kiln reads.
constexpr std::size_t kElfHeaderSize = 64;
constexpr std::size_t kSectionHeaderSize = 64;
constexpr std::size_t kSymbolSize = 24;
constexpr std::uint32_t kShtSymtab = 2;
constexpr std::uint32_t kShtStrtab = 3;
constexpr unsigned kSttFunc = 2;

// A byte range of the file whose reads are checked: out-of-range reads give nullopt instead of UB.
class Bytes {
 public:
  explicit Bytes(std::span<const unsigned char> b) : b_(b) {}

  std::size_t size() const noexcept { return b_.size(); }

  bool starts_with(std::string_view prefix) const noexcept {
    return prefix.size() <= b_.size() && std::memcmp(b_.data(), prefix.data(), prefix.size()) == 0;
  }

  // Whether [offset, offset + length) lies inside the file, without overflowing.
  bool contains(std::uint64_t offset, std::uint64_t length) const noexcept {
    return offset <= b_.size() && length <= b_.size() - offset;
  }

  template <typename T>
  std::optional<T> at(std::uint64_t offset) const noexcept {
    if (!contains(offset, sizeof(T))) return std::nullopt;
    T value;  // ELF cubins are little-endian, like every host kiln runs on
    std::memcpy(&value, b_.data() + offset, sizeof(T));
    return value;
  }

  // The NUL-terminated string at `offset`, which must end before `limit`.
  std::optional<std::string_view> c_string(std::uint64_t offset, std::uint64_t limit) const noexcept {
    limit = std::min<std::uint64_t>(limit, b_.size());
    if (offset >= limit) return std::nullopt;
    const auto* begin = reinterpret_cast<const char*>(b_.data() + offset);
    const auto* nul = static_cast<const char*>(std::memchr(begin, 0, limit - offset));
    if (nul == nullptr) return std::nullopt;
    return std::string_view(begin, static_cast<std::size_t>(nul - begin));
  }

 private:
  std::span<const unsigned char> b_;
};

struct Section {
  std::uint32_t type;
  std::uint64_t offset;
  std::uint64_t size;
  std::uint32_t link;
  std::uint64_t entsize;
};

class Elf {
 public:
  explicit Elf(std::span<const unsigned char> bytes) : f_(bytes) {}

  // Fills `out` or returns what is wrong.
  std::string read(Cubin& out) {
    if (f_.size() < kElfHeaderSize || !f_.starts_with("\x7f" "ELF")) return "not an ELF file";
    if (*f_.at<std::uint8_t>(4) != 2) return "not a 64-bit ELF file";
    if (*f_.at<std::uint8_t>(5) != 1) return "not a little-endian ELF file";
    const auto machine = *f_.at<std::uint16_t>(18);
    if (machine != kEmCuda)
      return "ELF machine " + std::to_string(machine) + ", expected " + std::to_string(kEmCuda) + " (EM_CUDA)";
    out.arch = (*f_.at<std::uint32_t>(48) >> 8) & 0xffu;
    if (out.arch == 0) return "ELF flags name no SM architecture";
    if (std::string why = read_section_table(); !why.empty()) return why;
    // The gABI allows one SHT_SYMTAB; insisting on it also keeps hostile files from making the
    // reader walk one big table once per section header.
    std::size_t symtab = sections_.size();
    for (std::size_t i = 0; i < sections_.size(); ++i) {
      if (sections_[i].type != kShtSymtab) continue;
      if (symtab != sections_.size()) return "ELF has more than one symbol table (sections " +
                                             std::to_string(symtab) + " and " + std::to_string(i) + ")";
      symtab = i;
    }
    if (symtab != sections_.size()) {
      if (std::string why = read_symbols(symtab, out); !why.empty()) return why;
    }
    std::sort(out.kernels.begin(), out.kernels.end());
    out.kernels.erase(std::unique(out.kernels.begin(), out.kernels.end()), out.kernels.end());
    return {};
  }

 private:
  std::string read_section_table() {
    const auto shoff = *f_.at<std::uint64_t>(40);
    const auto shentsize = *f_.at<std::uint16_t>(58);
    const auto shnum = *f_.at<std::uint16_t>(60);
    if (shnum == 0) return {};  // no sections, so no kernels; the caller reports the missing ones
    if (shentsize < kSectionHeaderSize)
      return "ELF section header size " + std::to_string(shentsize) + ", expected at least 64";
    if (!f_.contains(shoff, std::uint64_t{shnum} * shentsize))
      return "ELF section header table (" + std::to_string(shnum) + " entries at offset " + std::to_string(shoff) +
             ") runs past the end of the file (" + std::to_string(f_.size()) + " bytes)";
    sections_.reserve(shnum);
    for (std::uint64_t i = 0; i < shnum; ++i) {
      const std::uint64_t h = shoff + i * shentsize;  // in bounds: the whole table was checked above
      sections_.push_back({*f_.at<std::uint32_t>(h + 4), *f_.at<std::uint64_t>(h + 24), *f_.at<std::uint64_t>(h + 32),
                           *f_.at<std::uint32_t>(h + 40), *f_.at<std::uint64_t>(h + 56)});
    }
    return {};
  }

  std::string read_symbols(std::size_t index, Cubin& out) const {
    const Section& symtab = sections_[index];
    const std::string where = "ELF symbol table (section " + std::to_string(index) + ")";
    if (symtab.entsize != kSymbolSize)
      return where + ": entry size " + std::to_string(symtab.entsize) + ", expected 24";
    if (symtab.size % kSymbolSize != 0) return where + ": size " + std::to_string(symtab.size) + " is not a multiple of 24";
    if (!f_.contains(symtab.offset, symtab.size)) return where + " runs past the end of the file";
    if (symtab.link >= sections_.size() || sections_[symtab.link].type != kShtStrtab)
      return where + ": its string table (section " + std::to_string(symtab.link) + ") is not a string table";
    const Section& strtab = sections_[symtab.link];
    if (!f_.contains(strtab.offset, strtab.size)) return where + ": its string table runs past the end of the file";
    for (std::uint64_t s = symtab.offset; s < symtab.offset + symtab.size; s += kSymbolSize) {
      const auto info = *f_.at<std::uint8_t>(s + 4);
      const auto other = *f_.at<std::uint8_t>(s + 5);
      if ((info & 0xfu) != kSttFunc || (other & kStoCudaEntry) == 0) continue;
      const auto name_offset = *f_.at<std::uint32_t>(s);
      const auto name = f_.c_string(strtab.offset + name_offset, strtab.offset + strtab.size);
      if (!name || name->empty())
        return where + ": kernel symbol " + std::to_string((s - symtab.offset) / kSymbolSize) +
               " has no NUL-terminated name inside the string table";
      out.kernels.emplace_back(*name);
      out.kernel_bytes[std::string(*name)] = *f_.at<std::uint64_t>(s + 16);  // st_size
    }
    return {};
  }

  Bytes f_;
  std::vector<Section> sections_;
};

}  // namespace

bool Cubin::defines(std::string_view kernel) const noexcept {
  return std::binary_search(kernels.begin(), kernels.end(), kernel,
                            [](std::string_view a, std::string_view b) { return a < b; });
}

Cubin read_cubin(std::span<const unsigned char> bytes) {
  Cubin cubin;
  cubin.error = Elf(bytes).read(cubin);
  if (!cubin.ok()) {
    cubin.arch = 0;
    cubin.kernels.clear();
    cubin.kernel_bytes.clear();
  }
  return cubin;
}

Cubin read_cubin(std::string_view bytes) {
  return read_cubin(std::span(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size()));
}

}  // namespace kiln::detail
