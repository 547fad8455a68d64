// Catalog::find over the sorted kernel table.
#include <kiln/catalog.hpp>

#include <doctest/doctest.h>

#include "catalog_builder.hpp"

using kiln::test::CatalogBuilder;
using kiln::test::sm;

TEST_CASE("Catalog::find finds every kernel and misses everything else") {
  CatalogBuilder builder;
  const auto scan = builder.unit("scan", {sm(90)});
  const auto scale = builder.unit("scale", {sm(90)});
  const char* const names[] = {"scale_f64", "exclusive_scan_i32", "scale_f32", "block_sum_f32", "scale", "z"};
  for (const char* name : names) builder.kernel(name, name[0] == 's' ? scale : scan);
  const kiln::Catalog catalog = builder.build("r");

  for (const char* name : names) {
    CAPTURE(name);
    const kiln::KernelEntry* k = catalog.find(name);
    REQUIRE(k != nullptr);
    CHECK(catalog.str(k->name) == name);
    CHECK(k->unit == (name[0] == 's' ? scale : scan));
  }
  for (const char* miss : {"", "a", "scal", "scale_f", "scale_f320", "scale_f16", "zz", "Scale_f32", "block_sum"}) {
    CAPTURE(miss);
    CHECK(catalog.find(miss) == nullptr);
  }
}

TEST_CASE("Catalog::find compares whole names, not C strings") {
  CatalogBuilder builder;
  builder.kernel("ab", builder.unit("u", {}));
  const kiln::Catalog catalog = builder.build("r");
  // The packed string blob has no terminators: "ab" is followed by the next string's bytes.
  CHECK(catalog.find(std::string_view("ab\0", 3)) == nullptr);
  CHECK(catalog.find("ab") != nullptr);
}

TEST_CASE("Catalog::find in an empty catalog") {
  CatalogBuilder builder;
  const kiln::Catalog catalog = builder.build("empty");
  CHECK(catalog.find("") == nullptr);
  CHECK(catalog.find("scale_f32") == nullptr);
}

TEST_CASE("Catalog::find with one kernel") {
  CatalogBuilder builder;
  builder.kernel("only", builder.unit("u", {}));
  const kiln::Catalog catalog = builder.build("r");
  CHECK(catalog.find("only") == &catalog.kernels[0]);
  CHECK(catalog.find("onl") == nullptr);
  CHECK(catalog.find("only1") == nullptr);
}
