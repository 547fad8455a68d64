// The JIT tier's estimate of a unit's compile, by which the pool orders a table and finds its critical
// path: a unit that includes CCCL estimates longer than one that includes nothing, and assembling its
// PTX shorter than compiling its source.
#include <kiln/catalog.hpp>
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cache_test_util.hpp"  // TempDir
#include "chain/unit_source.hpp"
#include "examples_catalog.hpp"
#include "jit/include_scan.hpp"
#include "jit/request.hpp"
#include "jit_test_util.hpp"

namespace {

double estimate(std::string_view unit, bool from_ptx = false) {
  const kiln::Catalog& catalog = kiln::examples::catalog();
  const auto index = static_cast<std::uint32_t>(&kiln::test::example_unit(unit) - catalog.units.data());
  return kiln::detail::compile_estimate_ms(catalog, index, from_ptx);
}

}  // namespace

TEST_CASE("a unit's compile estimate grows with the headers it includes and the code it makes") {
  // vector_add includes nothing; block_sum_f32 includes CUB (7-9 MiB of headers: ~1 s of NVRTC's).
  const double trivial = estimate("vector_add"), cub = estimate("block_sum_f32");
  CHECK(trivial > 0);
  CHECK(trivial < 200);
  CHECK(cub > 800);
  CHECK(cub < 3000);
  CHECK(estimate("scale") > 0);
  // The PTX tier assembles without headers or NVRTC.
  CHECK(estimate("block_sum_f32", true) < cub / 4);
}

TEST_CASE("code that includes nothing costs 0.45 as much per KiB as code that includes CCCL") {
  const kiln::Catalog& catalog = kiln::examples::catalog();
  const auto largest_cubin_kib = [&](std::string_view unit) {
    double kib = 0;
    for (const auto& b : catalog.binaries_of(kiln::test::example_unit(unit)))
      if (b.kind == kiln::BinaryKind::cubin) kib = std::max(kib, b.size / 1024.0);
    return kib;
  };
  const double kib = largest_cubin_kib("vector_add");
  REQUIRE(kiln::test::example_unit("vector_add").header_count == 0);
  if (kib == 0) {
    MESSAGE("skipped: this build embeds no cubin of vector_add");
    return;
  }
  // 40 ms fixed, 25 ms per KiB of cubin for CCCL's code (the 200-unit registry's trace).
  CHECK(estimate("vector_add") == doctest::Approx(40 + 0.45 * 25 * kib).epsilon(0.001));
}

TEST_CASE("what a source includes from its -I directories counts by its bytes; FIFOs and loops cost nothing") {
  kiln::test::TempDir tmp;
  const auto dir = tmp.path() / "inc";
  std::filesystem::create_directories(dir / "lib");
  const auto write = [](const std::filesystem::path& p, const std::string& text) { std::ofstream(p) << text; };
  write(dir / "lib" / "a.h", "#include \"b.h\"\n#include <lib/a.h>\n" + std::string(1000, ' '));  // b.h beside it; itself again
  write(dir / "lib" / "b.h", std::string(500, ' '));
  write(dir / "big.h", std::string(2 << 20, ' '));  // counted by its size, not read
  REQUIRE(::mkfifo((dir / "fifo.h").c_str(), 0600) == 0);
  const std::vector<std::string> dirs{(tmp.path() / "nothing").string(), dir.string()};
  using kiln::detail::included_bytes;
  const auto a = std::filesystem::file_size(dir / "lib" / "a.h");
  CHECK(included_bytes("#include <lib/a.h>\n", {}, dirs) == a + 500);
  CHECK(included_bytes("  #  include \"big.h\"\n#include <fifo.h>\n#include <missing.h>\n", {}, dirs) == (2u << 20));
  CHECK(included_bytes("#include <lib/a.h>\n", {"lib/a.h"}, dirs) == 0);  // given in memory: counted apart
  CHECK(kiln::detail::include_dirs_of("-DX\n-I/a\n-I\n/b\n--include-path=/c") == std::vector<std::string>{"/a", "/b", "/c"});
}

TEST_CASE("a source's headers in memory count as headers parsed, not as its own code") {
  // A JIT-only table's unit bundles the headers it includes (CuPy's: ~3 MiB); counted at the source's
  // rate per KiB, a 1 KiB unit's estimate was ~60 times its measured compile.
  kiln::detail::UnitSource unit;
  unit.source = "#include <big.h>\n" + std::string(1024, ' ');
  const double alone = kiln::detail::source_estimate_ms(unit);
  unit.headers.push_back({"big.h", std::string(2 << 20, ' ')});
  const double with_headers = kiln::detail::source_estimate_ms(unit);
  CHECK(with_headers > alone);
  CHECK(with_headers - alone == doctest::Approx(2 * 150).epsilon(0.01));  // 150 ms per MiB of headers
  CHECK(with_headers < 1000);
}
