// Without a GPU: each registry linked into this program (geo, stats, kiln's examples) has its own
// name, kernels and architectures, and a kernel name two registries share resolves in each to its own.
#include <kiln/kiln.hpp>

#include "check.hpp"
#include "examples_catalog.hpp"
#include "geo_catalog.hpp"
#include "stats_catalog.hpp"

#include <algorithm>
#include <cstdio>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

// Typed handles, from the kernels' declarations (point_in_polygon.cu, families/translate.cu.j2, bounds.cu).
static_assert(std::is_same_v<decltype(consumer::geo::kernels::point_in_polygon_f32),
                             const kiln::KernelRef<void(float const*, float const*, int, float const*, float const*, int,
                                                        unsigned char*)>>);
static_assert(std::is_same_v<decltype(consumer::geo::kernels::translate_f32),
                             const kiln::KernelRef<void(float*, float*, float, float, int)>>);
static_assert(std::is_same_v<decltype(consumer::geo::kernels::bounds_f32),
                             const kiln::KernelRef<void(float const*, float const*, int, float*)>>);

namespace {

std::vector<unsigned> configured_archs() {  // CONSUMER_ARCHS: "80,90"
  std::vector<unsigned> archs;
  std::string text = CONSUMER_ARCHS;
  for (std::size_t start = 0; start < text.size();) {
    std::size_t end = std::min(text.find(',', start), text.size());
    archs.push_back(static_cast<unsigned>(std::stoul(text.substr(start, end - start))));
    start = end + 1;
  }
  return archs;
}

// Every unit holds a cubin for each configured architecture, then PTX for the newest.
void check_archs(const kiln::Catalog& catalog) {
  const std::vector<unsigned> archs = configured_archs();
  for (const kiln::UnitEntry& unit : catalog.units) {
    std::vector<unsigned> cubins;
    std::vector<unsigned> ptx;
    for (const kiln::BinaryEntry& b : catalog.binaries_of(unit))
      (b.kind == kiln::BinaryKind::cubin ? cubins : ptx).push_back(b.arch);
    CHECK(cubins == archs);
    CHECK(ptx == std::vector<unsigned>{archs.back()});
  }
}

std::vector<std::string_view> kernel_names(const kiln::Catalog& catalog) {
  std::vector<std::string_view> names;
  for (const kiln::KernelEntry& k : catalog.kernels) names.push_back(catalog.str(k.name));
  return names;
}

std::string first_cubin(const kiln::Catalog& catalog, const kiln::KernelEntry& kernel) {
  return catalog.image(catalog.binaries_of(catalog.units[kernel.unit]).front());
}

}  // namespace

int main() {
  const kiln::Catalog& geo = consumer::geo::catalog();
  const kiln::Catalog& stats = consumer::stats::catalog();
  const kiln::Catalog& examples = kiln::examples::catalog();

  CHECK(geo.name == "geo");
  CHECK(stats.name == "stats");
  CHECK(examples.name == "examples");
  CHECK(kernel_names(geo) ==
        (std::vector<std::string_view>{"argsort_desc_f32_block_sort", "argsort_desc_f32_merge",
                                       "argsort_desc_f32_partition", "bounds_f32", "count_scan_i64_init",
                                       "count_scan_i64_sweep", "dot_f64_final", "dot_f64_single_tile",
                                       "dot_f64_sweep", "max_by_a_tagged_final", "max_by_a_tagged_single_tile",
                                       "max_by_a_tagged_sweep", "multiples_i64_init", "multiples_i64_sweep",
                                       "point_in_polygon_f32", "point_in_polygon_f64", "positive_f64_init",
                                       "positive_f64_sweep", "products_f64_kernel", "ramp_i32_init", "ramp_i32_sweep",
                                       "run_starts_i32_init", "run_starts_i32_sweep", "running_max_i32_init",
                                       "running_max_i32_sweep", "scan_sum_f32_init", "scan_sum_f32_sweep",
                                       "segment_squares_f64_segments", "sort_desc_f32_block_sort",
                                       "sort_desc_f32_merge", "sort_desc_f32_partition", "sum_squares_f64_final",
                                       "sum_squares_f64_single_tile", "sum_squares_f64_sweep", "translate_f32"}));
  // kiln.* rows: the kernels their family declares, on the project's own type and operator, whose header the
  // JIT tier gets under the name the row gives it.
  CHECK(geo.str(geo.find("max_by_a_tagged_sweep")->expression)
            .starts_with("cub::detail::reduce::DeviceReduceKernel<kiln_prim::reduce<geo::Tagged, geo::MaxByA, void>::"));
  const kiln::UnitEntry& tagged = geo.units[geo.find("max_by_a_tagged_final")->unit];
  bool bundled = false;
  for (std::uint32_t i = 0; i < tagged.header_count; ++i)
    bundled |= geo.str(geo.headers[geo.unit_headers[tagged.first_header + i]].name) == "geo/tagged.cuh";
  CHECK(bundled);
  CHECK(kernel_names(stats) == std::vector<std::string_view>{"vector_add"});
  CHECK(geo.find("vector_add") == nullptr);
  CHECK(geo.str(geo.find("point_in_polygon_f32")->expression) == "geo::point_in_polygon<float>");
  CHECK(geo.str(geo.find("point_in_polygon_f64")->lowered).starts_with("_ZN3geo16point_in_polygonIdEEv"));
  CHECK(geo.str(geo.find("translate_f32")->lowered).starts_with("_ZN3geo9translateIfEEv"));
  // The JIT tier gets the project's headers under the names bounds.cu spells them (quoted, and through a
  // macro), from include/ inside the table's folder.
  const kiln::UnitEntry& bounds = geo.units[geo.find("bounds_f32")->unit];
  std::vector<std::string_view> headers;
  for (std::uint32_t i = 0; i < bounds.header_count; ++i)
    headers.push_back(geo.str(geo.headers[geo.unit_headers[bounds.first_header + i]].name));
  for (std::string_view wanted : {"geo/box.cuh", "geo/detail/minmax.cuh", "geo/limits.cuh", "cub/block/block_reduce.cuh"})
    CHECK(std::find(headers.begin(), headers.end(), wanted) != headers.end());
  check_archs(geo);
  check_archs(stats);
  check_archs(examples);  // the consumer passed its architectures to kiln too

  // vector_add: one name, one extern "C" symbol, two registries, two different kernels.
  const kiln::KernelEntry* ours = stats.find("vector_add");
  const kiln::KernelEntry* kilns = examples.find("vector_add");
  CHECK(ours != nullptr);
  CHECK(kilns != nullptr);
  if (ours && kilns) {
    CHECK(stats.str(ours->lowered) == examples.str(kilns->lowered));
    CHECK(first_cubin(stats, *ours) != first_cubin(examples, *kilns));
  }
  // Each catalog has its own blob symbol (kiln_blobs_<registry>): three distinct blobs.
  CHECK(geo.blobs != stats.blobs);
  CHECK(stats.blobs != examples.blobs);
  CHECK(geo.blobs != examples.blobs);

  // A registry per catalog; none touches CUDA before its first get().
  kiln::Registry r1(geo), r2(stats), r3(examples);
  CHECK(r1.stats().unit_loads + r2.stats().unit_loads + r3.stats().unit_loads == 0);

  std::printf("consumer cpu checks: %d failed\n", consumer::failures);
  return consumer::failures == 0 ? 0 : 1;
}
