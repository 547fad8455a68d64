// The primitives' catalog as built (libkiln_prim), without a GPU: every unit's images in standard,
// zstd-compressed fatbins, in libkiln_prim's .nv_fatbin section where cuobjdump reads them, each for the
// architecture it claims and defining every kernel of its unit.
#include <doctest/doctest.h>

#include <kiln/error.hpp>
#include <kiln/prim/common.hpp>

#include "fatbin_checks.hpp"

#include <dlfcn.h>

#include <string>
#include <thread>

TEST_CASE("every primitive unit's fatbins hold a cubin per configured architecture, then PTX, apart; a linked one LTO-IR") {
  kiln::test::check_coverage(kiln::prim::catalog(), KILN_TEST_EMBED_PTX);
}

TEST_CASE("every primitive image is stored zstd-compressed, the whole at least 4x smaller than unpacked") {
  const auto [stored, loaded] = kiln::test::check_compressed(kiln::prim::catalog());
  MESSAGE("primitives: images " << stored << " bytes embedded, " << loaded << " unpacked");
  // 16.23 MiB of cubins and PTX for the seven default archs is to fit in 4 MiB, compressed.
  CHECK(stored * 4 <= loaded);
}

TEST_CASE("every primitive cubin's ELF header names its architecture, and every kernel is a symbol in it") {
  kiln::test::check_images(kiln::prim::catalog());
}

TEST_CASE("libkiln_prim's .nv_fatbin section reads as fatbins back to back and holds the catalog's") {
  Dl_info info{};
  REQUIRE(dladdr(reinterpret_cast<const void*>(&kiln::prim::catalog), &info) != 0);
  kiln::test::check_in_fatbin_section(kiln::prim::catalog(), info.dli_fname);
}

TEST_CASE("the primitives' registries: one per device, registry() device 0's without a current context") {
  kiln::Registry& zero = kiln::prim::registry(0);
  CHECK(&kiln::prim::registry(0) == &zero);
  const kiln::Registry* current = nullptr;
  std::thread([&] { current = &kiln::prim::registry(); }).join();  // a new thread: no context current
  CHECK(current == &zero);
  kiln::Registry& one = kiln::prim::registry(1);  // made without CUDA: a device 1 need not exist until used
  CHECK(&one != &zero);
  CHECK(&one.catalog() == &kiln::prim::catalog());
  for (const int bad : {-1, 64}) {
    CAPTURE(bad);
    try {
      (void)kiln::prim::registry(bad);
      FAIL("a device ordinal out of range was served");
    } catch (const kiln::Error& e) {
      CHECK(e.code() == kiln::Errc::invalid_argument);
      CHECK(std::string(e.what()).find("device " + std::to_string(bad)) != std::string::npos);
    }
  }
}
