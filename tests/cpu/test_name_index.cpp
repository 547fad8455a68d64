// The registry's hashed name index answers exactly as the catalog's sorted search.
#include <kiln/catalog.hpp>
#include <doctest/doctest.h>

#include "examples_catalog.hpp"
#include "registry/name_index.hpp"

#include <string>

TEST_CASE("the name index finds every kernel of a catalog, and nothing else") {
  const kiln::Catalog& catalog = kiln::examples::catalog();
  const kiln::detail::NameIndex index = kiln::detail::build_name_index(catalog);
  CHECK(index.size() >= 2 * catalog.kernels.size());
  for (const kiln::KernelEntry& k : catalog.kernels) {
    const std::string name(catalog.str(k.name));
    CAPTURE(name);
    CHECK(kiln::detail::find_by_name(catalog, index, name) == &k);
    CHECK(kiln::detail::find_by_name(catalog, index, name) == catalog.find(name));
    // A prefix, a longer name and a changed last letter are other names.
    CHECK(kiln::detail::find_by_name(catalog, index, name.substr(0, name.size() - 1)) == catalog.find(name.substr(0, name.size() - 1)));
    CHECK(kiln::detail::find_by_name(catalog, index, name + "x") == nullptr);
    std::string changed = name;
    changed.back() = changed.back() == 'z' ? 'y' : 'z';
    CHECK(kiln::detail::find_by_name(catalog, index, changed) == catalog.find(changed));
  }
  CHECK(kiln::detail::find_by_name(catalog, index, "") == nullptr);
  CHECK(kiln::detail::find_by_name(catalog, index, "no_such_kernel") == nullptr);
}
