// LibFuzzer target: the cache entry decoder, the parsers behind its checksum, and the file reader that
// checks the header before reading (or allocating for) anything more.
#include <kiln/cache.hpp>
#include "chain/entry.hpp"
#include "cache_golden_input.hpp"
#include "disk/files.hpp"
#include "chain/key.hpp"
#include "base/cubin_elf.hpp"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

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

  // What the cache's reader does with a file of these bytes: the header first (within the caps), then
  // exactly what it promises. Whatever it accepts is the whole file, and splits as an entry.
  if (const auto sizes = read_entry_header(bytes); sizes.ok()) {
    require(sizes->key_text <= kMaxKeyTextBytes && sizes->frame <= kMaxFrameBytes);
    require(check_entry_size(*sizes, sizes->file()).ok());
  } else {
    require(!split_entry(bytes).ok());  // split_entry refuses what the header check refuses
  }
  static const int file = [] {
    const int fd = ::memfd_create("fuzz_cache_entry", MFD_CLOEXEC);
    require(fd >= 0 && ::fchmod(fd, 0600) == 0);  // as kiln writes entries: its own, private
    return fd;
  }();
  require(::ftruncate(file, 0) == 0 && ::pwrite(file, data, size, 0) == static_cast<ssize_t>(size) &&
          ::lseek(file, 0, SEEK_SET) == 0);
  const EntryFile read = read_entry_fd(file, "fuzz");
  if (read.status == EntryFile::Status::ok) require(read.bytes == bytes);
  return 0;
}
