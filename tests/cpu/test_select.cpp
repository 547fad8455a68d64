// Which embedded binary runs on which device, and the messages when none does.
#include <kiln/catalog.hpp>
#include <kiln/select.hpp>

#include <doctest/doctest.h>

#include "catalog_builder.hpp"
#include "text_util.hpp"

using kiln::test::CatalogBuilder;
using kiln::test::compute;
using kiln::test::sm;

namespace {

// The label of the binary select_binary picks for the catalog's only unit, or "none".
std::string pick(std::initializer_list<CatalogBuilder::Binary> binaries, unsigned device_arch, bool allow_ptx) {
  CatalogBuilder builder;
  builder.unit("u", binaries);
  const kiln::Catalog catalog = builder.build("r");
  const kiln::BinaryEntry* b = kiln::select_binary(catalog, catalog.units[0], device_arch, allow_ptx);
  return b ? kiln::binary_label(*b) : "none";
}

using kiln::test::contains;

}  // namespace

TEST_CASE("select_binary: the cubin built for exactly the device's architecture") {
  const auto all = {sm(75), sm(80), sm(86), sm(89), sm(90), sm(100), sm(120), compute(120)};
  for (unsigned arch : {75u, 80u, 86u, 89u, 90u, 100u, 120u}) {
    CAPTURE(arch);
    CHECK(pick(all, arch, false) == "sm_" + std::to_string(arch));
    CHECK(pick(all, arch, true) == "sm_" + std::to_string(arch));
  }
}

TEST_CASE("select_binary: the same major's highest lower minor") {
  CHECK(pick({sm(80)}, 86, false) == "sm_80");
  CHECK(pick({sm(80)}, 89, false) == "sm_80");
  CHECK(pick({sm(75), sm(80), sm(86), sm(90)}, 89, false) == "sm_86");
  CHECK(pick({sm(120)}, 121, false) == "sm_120");
  SUBCASE("a cubin of the same major beats PTX even when PTX is allowed") {
    CHECK(pick({sm(80), compute(86)}, 86, true) == "sm_80");
  }
}

TEST_CASE("select_binary: never across majors, never a higher minor") {
  CHECK(pick({sm(80)}, 90, false) == "none");
  CHECK(pick({sm(75), sm(80), sm(86)}, 90, false) == "none");
  CHECK(pick({sm(90)}, 100, false) == "none");
  CHECK(pick({sm(90)}, 80, false) == "none");
  CHECK(pick({sm(86)}, 80, false) == "none");
  CHECK(pick({sm(100)}, 120, false) == "none");
}

TEST_CASE("select_binary: PTX only when allowed, and only when its architecture is not above the device's") {
  CHECK(pick({sm(80), compute(80)}, 90, false) == "none");
  CHECK(pick({sm(80), compute(80)}, 90, true) == "compute_80");
  CHECK(pick({compute(75), compute(90)}, 89, true) == "compute_75");
  CHECK(pick({compute(75), compute(90)}, 100, true) == "compute_90");
  CHECK(pick({compute(75), compute(90)}, 90, true) == "compute_90");
  CHECK(pick({compute(75), compute(90)}, 70, true) == "none");
  CHECK(pick({sm(90), compute(120)}, 100, true) == "none");
}

TEST_CASE("select_ptx: the PTX the PTX tier assembles, also where a cubin for the device is embedded") {
  CatalogBuilder builder;
  builder.unit("u", {sm(90), compute(80), compute(90)});
  const kiln::Catalog catalog = builder.build("r");
  const kiln::BinaryEntry* b = kiln::select_ptx(catalog, catalog.units[0], 90);
  REQUIRE(b != nullptr);
  CHECK(kiln::binary_label(*b) == "compute_90");
  CHECK(kiln::binary_label(*kiln::select_ptx(catalog, catalog.units[0], 89)) == "compute_80");
  CHECK(kiln::select_ptx(catalog, catalog.units[0], 75) == nullptr);
}

TEST_CASE("select_binary: a unit with no binaries") {
  CHECK(pick({}, 90, false) == "none");
  CHECK(pick({}, 90, true) == "none");
}

TEST_CASE("select_binary looks only at its own unit's binaries") {
  CatalogBuilder builder;
  builder.unit("first", {sm(90)});
  builder.unit("second", {sm(80), compute(80)});
  const kiln::Catalog catalog = builder.build("r");
  CHECK(kiln::select_binary(catalog, catalog.units[1], 90, false) == nullptr);
  const kiln::BinaryEntry* b = kiln::select_binary(catalog, catalog.units[0], 90, false);
  REQUIRE(b != nullptr);
  CHECK(b == &catalog.binaries[0]);
}

TEST_CASE("binary_label") {
  CHECK(kiln::binary_label(kiln::BinaryKind::cubin, 90) == "sm_90");
  CHECK(kiln::binary_label(kiln::BinaryKind::cubin, 75) == "sm_75");
  CHECK(kiln::binary_label(kiln::BinaryKind::ptx, 120) == "compute_120");
  CHECK(kiln::binary_label(kiln::BinaryKind::ptx, 80) == "compute_80");
}

TEST_CASE("embedded_labels lists a unit's binaries in catalog order") {
  CatalogBuilder builder;
  builder.unit("empty", {});
  builder.unit("u", {sm(75), sm(90), compute(120)});
  const kiln::Catalog catalog = builder.build("r");
  CHECK(kiln::embedded_labels(catalog, catalog.units[0]) == "");
  CHECK(kiln::embedded_labels(catalog, catalog.units[1]) == "sm_75 sm_90 compute_120");
}

TEST_CASE("no_binary_message names the kernel, the device, what is embedded and what to do") {
  CatalogBuilder builder;
  const auto unit = builder.unit("block_sum", {sm(75), sm(80), sm(90), compute(80), compute(120)});
  builder.kernel("block_sum_f32", unit);
  const kiln::Catalog catalog = builder.build("examples");
  const kiln::KernelEntry& kernel = catalog.kernels[0];

  const std::string message = kiln::no_binary_message(catalog, kernel, 100, false);
  CAPTURE(message);
  CHECK(contains(message, "'block_sum_f32'"));
  CHECK(contains(message, "'block_sum'"));
  CHECK(contains(message, "'examples'"));
  CHECK(contains(message, "(sm_100)"));
  CHECK(contains(message, "sm_75 sm_80 sm_90 compute_80 compute_120"));
  CHECK(contains(message, "-Darchs=sm_75,sm_80,sm_90,sm_100"));
  SUBCASE("offers the embedded PTX that would fit when PTX is not allowed") {
    CHECK(contains(message, "compute_80 (RegistryOptions::allow_ptx)"));
  }
  SUBCASE("does not offer PTX when none fits the device") {
    const std::string old_device = kiln::no_binary_message(catalog, kernel, 70, false);
    CAPTURE(old_device);
    CHECK(contains(old_device, "(sm_70)"));
    CHECK_FALSE(contains(old_device, "allow_ptx"));
  }
  SUBCASE("does not offer PTX when it is already allowed") {
    CHECK_FALSE(contains(kiln::no_binary_message(catalog, kernel, 100, true), "allow_ptx"));
  }
  CHECK(message.find('\n') == std::string::npos);
}

TEST_CASE("unknown_kernel_message suggests the closest names, closest first") {
  CatalogBuilder builder;
  const auto unit = builder.unit("u", {sm(90)});
  for (const char* name : {"block_sum_f32", "exclusive_scan_i32", "scale_f64", "scale_f32"}) builder.kernel(name, unit);
  const kiln::Catalog catalog = builder.build("examples");

  CHECK(kiln::unknown_kernel_message(catalog, "scal_f32") ==
        "kiln: no kernel 'scal_f32' in registry 'examples'; closest: scale_f32, scale_f64");
  CHECK(kiln::unknown_kernel_message(catalog, "block_sum_f64") ==
        "kiln: no kernel 'block_sum_f64' in registry 'examples'; closest: block_sum_f32");

  SUBCASE("no suggestion for a name far from every kernel") {
    const std::string message = kiln::unknown_kernel_message(catalog, "radix_sort_pairs");
    CAPTURE(message);
    CHECK_FALSE(contains(message, "closest"));
    CHECK(contains(message, "4 kernels: block_sum_f32, exclusive_scan_i32, scale_f32, scale_f64)"));
  }
  SUBCASE("an empty name suggests nothing") {
    CHECK_FALSE(contains(kiln::unknown_kernel_message(catalog, ""), "closest"));
  }
}

TEST_CASE("unknown_kernel_message suggests at most three names") {
  CatalogBuilder builder;
  const auto unit = builder.unit("u", {sm(90)});
  for (const char* name : {"copy_i8", "copy_i16", "copy_i32", "copy_i64", "copy_u32"}) builder.kernel(name, unit);
  const kiln::Catalog catalog = builder.build("r");
  CHECK(kiln::unknown_kernel_message(catalog, "copy_i33") ==
        "kiln: no kernel 'copy_i33' in registry 'r'; closest: copy_i32, copy_i16, copy_i64");
}

TEST_CASE("unknown_kernel_message in an empty catalog") {
  CatalogBuilder builder;
  const kiln::Catalog catalog = builder.build("empty");
  const std::string message = kiln::unknown_kernel_message(catalog, "scale_f32");
  CHECK(contains(message, "'empty'"));
  CHECK(contains(message, "0 kernels"));
}
