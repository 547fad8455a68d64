// LibFuzzer target: the fatbin reader (containers, image headers) and the image unpacker (zstd) the embedded
// and PTX tiers read catalogs' images with. The bytes are a program's own, but the reader is bounds-checked
// like any other: nothing it is handed may make it read or allocate past what the bytes justify.
#include "base/fatbin.hpp"

#include <cstdint>
#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace kiln::detail;
  const std::span<const unsigned char> bytes(data, size);
  if (const auto images = read_fatbins(bytes); images.ok()) {
    for (const FatbinImage& image : *images) {
      // Every image lies inside the bytes, and what unpacks is exactly the size its header states.
      if (image.payload.data() < data || image.payload.data() + image.payload.size() > data + size) std::abort();
      if (const auto unpacked = unpack(image); unpacked.ok() && unpacked->size() != image.size) std::abort();
    }
  }
  // An image read at any offset, as the embedded tier reads one where its catalog says.
  if (size >= 2) (void)read_fatbin_image(bytes, data[0] % size);
  return 0;
}
