// Lazy inputs (kiln_prim/iterators.cuh) on kiln.* rows of a project's own table (bench/kernels/
// lazy_units.toml) against nvcc-compiled cub::Device* called with the same iterators and functors, on the
// same data: a segmented sum of squares read through a transform iterator (segments of about 1000 items),
// the multiples of 3 among 0, 1, … (a select from a counting iterator), products of two float arrays (a
// transform of a zip), where each run of equal keys starts (a unique-by-key whose values are a counting
// iterator) and an argsort (cub::DeviceMergeSort::SortPairsCopy, values a counting iterator). Rates count
// the bytes read from memory and written (select: written; transform: both) or items (G items/s).
#include "prim_bench.hpp"

#include <kiln/prim/merge_sort_plan.cuh>
#include <kiln/prim/segmented_reduce_plan.cuh>
#include <kiln/prim/select_plan.cuh>
#include <kiln/prim/transform_plan.cuh>
#include <kiln/prim/unique_by_key_plan.cuh>

#include <kiln_bench/lazy_ops.cuh>
#include <kiln_prim/iterators.cuh>

#include <cub/device/device_merge_sort.cuh>
#include <cub/device/device_segmented_reduce.cuh>
#include <cub/device/device_select.cuh>
#include <cub/device/device_transform.cuh>

#include <cuda/std/functional>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "bench_lazy_catalog.hpp"
#include "prim_bench_util.cuh"

namespace kiln::bench {
namespace {

kiln::Registry& lazy_registry() {
  static kiln::Registry registry(kiln::bench_lazy::catalog());
  return registry;
}

using Squares = kiln_prim::transform_iterator<double, kiln_bench::SquareF, const float*>;
using Count64 = kiln_prim::counting_iterator<long long>;
using Zip = kiln_prim::zip_iterator<const float*, const float*>;
using Count32 = kiln_prim::counting_iterator<int>;

Row segment_squares_row(std::size_t n) {
  const std::size_t segments = std::max<std::size_t>(1, n / 1000);
  auto in = std::make_shared<DeviceVector<float>>(n);
  fill_random(*in, -1.0f, 1.0f);
  auto offsets = std::make_shared<DeviceVector<std::int32_t>>(segments + 1);
  offsets->upload(equal_offsets(n, segments));
  auto out = std::make_shared<DeviceVector<double>>(segments);
  auto plan = std::make_shared<kiln::prim::SegmentedReduction<double, ::cuda::std::plus<>, Squares>>(
      lazy_registry(), "segment_squares_f64");
  auto kiln_temp = std::make_shared<DeviceVector<std::uint8_t>>(std::max<std::size_t>(1, plan->temp_bytes(segments)));
  std::size_t cub_bytes = 0;
  check_cuda(cub::DeviceSegmentedReduce::Reduce(nullptr, cub_bytes, Squares{in->data(), {}}, out->data(),
                                                std::int64_t(segments), offsets->data(), offsets->data() + 1,
                                                ::cuda::std::plus<>{}, 0.0));
  auto cub_temp = std::make_shared<DeviceVector<std::uint8_t>>(std::max<std::size_t>(1, cub_bytes));
  Row row;
  row.family = "segmented_reduce (transform iterator)";
  row.type = "f32→f64";
  row.n = n;
  row.bytes = double(sizeof(float)) * double(n);
  row.kiln = [=](CUstream s) {
    (*plan)(Squares{in->data(), {}}, out->data(), segments, offsets->data(), 0.0,
            kiln::prim::TempStorage{kiln_temp->data(), kiln_temp->size()}, s);
  };
  row.cub = [=](CUstream s) {
    std::size_t bytes = cub_temp->size();
    check_cuda(cub::DeviceSegmentedReduce::Reduce(cub_temp->data(), bytes, Squares{in->data(), {}}, out->data(),
                                                  std::int64_t(segments), offsets->data(), offsets->data() + 1,
                                                  ::cuda::std::plus<>{}, 0.0, s));
  };
  row.release = [in, offsets, out, kiln_temp, cub_temp, plan]() mutable {
    in.reset(), offsets.reset(), out.reset(), kiln_temp.reset(), cub_temp.reset(), plan.reset();
  };
  return row;
}

Row thirds_row(std::size_t n) {
  auto out = std::make_shared<DeviceVector<long long>>(n);
  auto count = std::make_shared<DeviceVector<long long>>(1);
  auto plan = std::make_shared<kiln::prim::SelectIf<long long, kiln_bench::ThirdL, Count64>>(lazy_registry(),
                                                                                              "thirds_i64");
  auto kiln_temp = std::make_shared<DeviceVector<std::uint8_t>>(plan->temp_bytes(n));
  std::size_t cub_bytes = 0;
  check_cuda(cub::DeviceSelect::If(nullptr, cub_bytes, Count64{0}, out->data(), count->data(), std::int64_t(n),
                                   kiln_bench::ThirdL{}));
  auto cub_temp = std::make_shared<DeviceVector<std::uint8_t>>(cub_bytes);
  Row row;
  row.family = "select (counting iterator)";
  row.type = "i64";
  row.n = n;
  row.bytes = double(sizeof(long long)) * double((n + 2) / 3);
  row.kiln = [=](CUstream s) {
    (*plan)(Count64{0}, out->data(), count->data(), n, kiln::prim::TempStorage{kiln_temp->data(), kiln_temp->size()},
            s);
  };
  row.cub = [=](CUstream s) {
    std::size_t bytes = cub_temp->size();
    check_cuda(cub::DeviceSelect::If(cub_temp->data(), bytes, Count64{0}, out->data(), count->data(), std::int64_t(n),
                                     kiln_bench::ThirdL{}, s));
  };
  row.release = [out, count, kiln_temp, cub_temp, plan]() mutable {
    out.reset(), count.reset(), kiln_temp.reset(), cub_temp.reset(), plan.reset();
  };
  return row;
}

Row products_row(std::size_t n) {
  auto x = std::make_shared<DeviceVector<float>>(n);
  auto y = std::make_shared<DeviceVector<float>>(n);
  fill_random(*x, -1.0f, 1.0f);
  fill_random(*y, -1.0f, 1.0f);
  auto out = std::make_shared<DeviceVector<double>>(n);
  auto plan = std::make_shared<kiln::prim::Transform<kiln_prim::pair<float, float>, double, kiln_bench::ProductF, Zip>>(
      lazy_registry(), "products_f64");
  Row row;
  row.family = "transform (zip)";
  row.type = "f32,f32→f64";
  row.n = n;
  row.bytes = (2.0 * sizeof(float) + sizeof(double)) * double(n);
  row.kiln = [=](CUstream s) { (*plan)(Zip{x->data(), y->data()}, out->data(), n, s); };
  row.cub = [=](CUstream s) {
    check_cuda(cub::DeviceTransform::Transform(Zip{x->data(), y->data()}, out->data(), std::int64_t(n),
                                               kiln_bench::ProductF{}, s));
  };
  row.release = [x, y, out, plan]() mutable { x.reset(), y.reset(), out.reset(), plan.reset(); };
  return row;
}

// Sorted keys in runs of 3 (keys 0 .. n/3).
Row run_starts_row(std::size_t n) {
  std::vector<std::int32_t> host(n);
  for (std::size_t i = 0; i < n; ++i) host[i] = std::int32_t(i / 3);
  auto keys = std::make_shared<DeviceVector<int>>(n);
  keys->upload(host);
  auto keys_out = std::make_shared<DeviceVector<int>>(n);
  auto starts = std::make_shared<DeviceVector<int>>(n);
  auto count = std::make_shared<DeviceVector<unsigned long long>>(1);
  auto plan = std::make_shared<kiln::prim::Unique<int, int, ::cuda::std::equal_to<>, void, Count32>>(
      lazy_registry(), "run_starts_i32");
  auto kiln_temp = std::make_shared<DeviceVector<std::uint8_t>>(plan->temp_bytes(n));
  std::size_t cub_bytes = 0;
  check_cuda(cub::DeviceSelect::UniqueByKey(nullptr, cub_bytes, keys->data(), Count32{0}, keys_out->data(),
                                            starts->data(), count->data(), int(n), ::cuda::std::equal_to<>{}));
  auto cub_temp = std::make_shared<DeviceVector<std::uint8_t>>(cub_bytes);
  Row row;
  row.family = "unique_by_key (counting values)";
  row.type = "i32+i32";
  row.n = n;
  row.kiln = [=](CUstream s) {
    (*plan)(keys->data(), Count32{0}, keys_out->data(), starts->data(), count->data(), n,
            kiln::prim::TempStorage{kiln_temp->data(), kiln_temp->size()}, s);
  };
  row.cub = [=](CUstream s) {
    std::size_t bytes = cub_temp->size();
    check_cuda(cub::DeviceSelect::UniqueByKey(cub_temp->data(), bytes, keys->data(), Count32{0}, keys_out->data(),
                                              starts->data(), count->data(), int(n), ::cuda::std::equal_to<>{}, s));
  };
  row.release = [keys, keys_out, starts, count, kiln_temp, cub_temp, plan]() mutable {
    keys.reset(), keys_out.reset(), starts.reset(), count.reset(), kiln_temp.reset(), cub_temp.reset(), plan.reset();
  };
  return row;
}

// The input keys stay as they are (the sort copies), so no reset between runs.
Row argsort_row(std::size_t n) {
  auto keys = std::make_shared<DeviceVector<float>>(n);
  fill_random(*keys, -1000.0f, 1000.0f);
  auto sorted = std::make_shared<DeviceVector<float>>(n);
  auto order = std::make_shared<DeviceVector<int>>(n);
  auto plan = std::make_shared<kiln::prim::MergeSort<float, int, ::cuda::std::less<>, void, Count32>>(
      lazy_registry(), "argsort_f32");
  auto kiln_temp = std::make_shared<DeviceVector<std::uint8_t>>(std::max<std::size_t>(1, plan->temp_bytes(n)));
  std::size_t cub_bytes = 0;
  check_cuda(cub::DeviceMergeSort::SortPairsCopy(nullptr, cub_bytes, static_cast<const float*>(keys->data()),
                                                 Count32{0}, sorted->data(), order->data(), int(n),
                                                 ::cuda::std::less<>{}));
  auto cub_temp = std::make_shared<DeviceVector<std::uint8_t>>(std::max<std::size_t>(1, cub_bytes));
  Row row;
  row.family = "merge_sort copy (argsort)";
  row.type = "f32+i32";
  row.n = n;
  row.kiln = [=](CUstream s) {
    (*plan)(keys->data(), Count32{0}, sorted->data(), order->data(), n,
            kiln::prim::TempStorage{kiln_temp->data(), kiln_temp->size()}, s);
  };
  row.cub = [=](CUstream s) {
    std::size_t bytes = cub_temp->size();
    check_cuda(cub::DeviceMergeSort::SortPairsCopy(cub_temp->data(), bytes, static_cast<const float*>(keys->data()),
                                                   Count32{0}, sorted->data(), order->data(), int(n),
                                                   ::cuda::std::less<>{}, s));
  };
  row.release = [keys, sorted, order, kiln_temp, cub_temp, plan]() mutable {
    keys.reset(), sorted.reset(), order.reset(), kiln_temp.reset(), cub_temp.reset(), plan.reset();
  };
  return row;
}

}  // namespace

std::vector<Row> lazy_rows(std::size_t n) {
  return {segment_squares_row(n), thirds_row(n), products_row(n), run_starts_row(n), argsort_row(n)};
}

}  // namespace kiln::bench
