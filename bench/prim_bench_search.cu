// Lower_bound/upper_bound of n random needles in a sorted haystack of n
// elements, kiln's plan against the same functor (kiln_prim::search_op) through nvcc-compiled
// cub::DeviceFor::Bulk. Rate: needles per second (G items/s).
#include "prim_bench.hpp"

#include <kiln/prim/search.hpp>
#include <kiln_prim/search.cuh>

#include <cub/device/device_for.cuh>

#include <cstdint>
#include <memory>
#include <random>
#include <type_traits>

#include "prim_bench_util.cuh"

namespace kiln::bench {
namespace {

template <typename T>
struct SearchData {
  std::shared_ptr<DeviceVector<T>> haystack, needles;
  std::shared_ptr<DeviceVector<std::int64_t>> out;
};

// A sorted haystack from cumulative random gaps (O(n), no sort: 2^28 items are built in seconds), and
// needles uniform over its range, in random order.
template <typename T>
SearchData<T> make_data(std::size_t n) {
  std::mt19937_64 rng(42);
  std::vector<T> h(n), q(n);
  T v = std::is_floating_point_v<T> ? T(-1e6) : std::is_signed_v<T> ? T(-std::int64_t(n) * 2) : T(0);
  for (auto& x : h) {
    v = T(v + T(rng() % 5));  // 0..4: about one in five repeats its predecessor
    x = v;
  }
  const double lo = double(h.empty() ? T(0) : h.front()), hi = double(h.empty() ? T(0) : h.back());
  for (auto& x : q) x = T(lo + (hi - lo) * double(rng() >> 11) * 0x1p-53);
  SearchData<T> d{std::make_shared<DeviceVector<T>>(n), std::make_shared<DeviceVector<T>>(n),
                  std::make_shared<DeviceVector<std::int64_t>>(n)};
  d.haystack->upload(h);
  d.needles->upload(q);
  return d;
}

template <typename T, kiln::prim::Side S>
Row search_row(std::size_t n, const SearchData<T>& d) {
  using K = kiln::prim::detail::kernel_t<T>;
  auto plan = std::make_shared<kiln::prim::SortedSearch<T, S>>();
  const kiln_prim::search_op<K, S == kiln::prim::Side::upper> op{
      reinterpret_cast<const K*>(d.haystack->data()), static_cast<unsigned int>(n),
      reinterpret_cast<const K*>(d.needles->data()), reinterpret_cast<long long*>(d.out->data())};

  Row row;
  row.family = S == kiln::prim::Side::lower ? "lower_bound" : "upper_bound";
  row.type = kiln::prim::detail::type_suffix<T>();
  row.n = n;
  row.bytes = 0;  // G items/s: needles per second, haystack of n
  auto haystack = d.haystack, needles = d.needles;
  auto out = d.out;
  row.kiln = [=](CUstream s) { (*plan)(haystack->data(), n, needles->data(), out->data(), n, s); };
  row.cub = [=](CUstream s) { check_cuda(cub::DeviceFor::Bulk(static_cast<unsigned int>(n), op, s)); };
  row.release = [haystack, needles, out, plan]() mutable { haystack.reset(); needles.reset(); out.reset(); plan.reset(); };
  return row;
}

template <typename T>
void add_rows(std::vector<Row>& rows, std::size_t n) {
  const SearchData<T> d = make_data<T>(n);  // shared by the type's two rows, freed after the second
  rows.push_back(search_row<T, kiln::prim::Side::lower>(n, d));
  rows.push_back(search_row<T, kiln::prim::Side::upper>(n, d));
}

}  // namespace

std::vector<Row> search_rows(std::size_t n) {
  std::vector<Row> rows;
  add_rows<std::int32_t>(rows, n);
  add_rows<std::int64_t>(rows, n);
  add_rows<double>(rows, n);
  add_rows<std::uint64_t>(rows, n);
  return rows;
}

}  // namespace kiln::bench
