// The types of libkiln_prim's fixed-type plans (kiln/prim/plan_types.hpp, generated from the table) against
// the catalog built from the same table, without a GPU: each type names the unit its plan looks up, every
// fixed-type unit is named by one, and each type's one-shot function links (the library instantiated it).
#include <doctest/doctest.h>

#include <kiln/prim.hpp>

#include <cstdint>
#include <set>
#include <string>

namespace {

using kiln::prim::detail::type_suffix;

// A one-shot function's address goes here, so that the link needs the library's instantiation of it.
volatile std::uintptr_t linked_address = 0;

template <typename F>
void add(std::set<std::string>& listed, const std::string& unit, F* one_shot) {
  CHECK_MESSAGE(listed.insert(unit).second, unit << " is listed twice");
  linked_address = reinterpret_cast<std::uintptr_t>(one_shot);
}

}  // namespace

TEST_CASE("every fixed-type plan's list of types is its family's rows of the catalog, each type linked") {
  namespace prim = kiln::prim;
  std::set<std::string> listed;
#define ONE(T) add(listed, std::string("exclusive_scan_") + type_suffix<T>(), &prim::exclusive_sum<T>);
  KILN_PRIM_EXCLUSIVE_SUM_TYPES(ONE)
#undef ONE
#define ONE(T) add(listed, std::string("reduce_") + type_suffix<T>(), &prim::reduce_sum<T>);
  KILN_PRIM_REDUCE_SUM_TYPES(ONE)
#undef ONE
#define ONE(T, Op) \
  add(listed, std::string("segmented_reduce_" #Op "_") + type_suffix<T>(), &prim::segmented_reduce<prim::ReduceOp::Op, T>);
  KILN_PRIM_SEGMENTED_REDUCE_TYPES(ONE)
#undef ONE
#define ONE(K) add(listed, std::string("merge_sort_pairs_") + type_suffix<K>(), &prim::merge_sort_pairs<K>);
  KILN_PRIM_MERGE_SORT_PAIRS_TYPES(ONE)
#undef ONE
#define ONE(K) add(listed, std::string("unique_by_key_") + type_suffix<K>(), &prim::unique_by_key<K>);
  KILN_PRIM_UNIQUE_BY_KEY_TYPES(ONE)
#undef ONE
#define ONE(K) add(listed, std::string("segmented_sort_") + type_suffix<K>(), &prim::segmented_sort<K>);
  KILN_PRIM_SEGMENTED_SORT_TYPES(ONE)
#undef ONE
#define ONE(K)                                                                                                    \
  add(listed, std::string("radix_sort_pairs_") + type_suffix<K>(),                                               \
      static_cast<void (*)(prim::DoubleBuffer<K>&, prim::DoubleBuffer<std::int32_t>&, std::size_t, CUstream)>( \
          &prim::radix_sort_pairs<K>));
  KILN_PRIM_RADIX_SORT_PAIRS_TYPES(ONE)
#undef ONE
#define ONE(I) add(listed, std::string("select_") + type_suffix<I>(), &prim::select_indices<I>);
  KILN_PRIM_SELECT_INDICES_TYPES(ONE)
#undef ONE
#define ONE(T, S) add(listed, std::string(#S "_bound_") + type_suffix<T>(), &prim::S##_bound<T>);
  KILN_PRIM_SORTED_SEARCH_TYPES(ONE)
#undef ONE

  const kiln::Catalog& catalog = prim::catalog();
  std::set<std::string> fixed;  // the table's rows of prim.* families: every unit but the linked ones
  for (const kiln::UnitEntry& unit : catalog.units) {
    if (!unit.linked) fixed.insert(std::string(catalog.str(unit.name)));
  }
  CHECK(!fixed.empty());
  CHECK(listed == fixed);
}
