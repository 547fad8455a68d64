// Select of indices by a byte mask (random 50% kept), kiln's plan against
// cub::DeviceSelect::Flagged over thrust::counting_iterator (CCCL 3.0.1's counting iterator). Rate: mask
// items per second (G items/s).
#include "prim_bench.hpp"

#include <kiln/prim/select.hpp>

#include <cub/device/device_select.cuh>
#include <thrust/iterator/counting_iterator.h>

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "prim_bench_util.cuh"

namespace kiln::bench {
namespace {

template <typename I>
Row select_row(std::size_t n, std::shared_ptr<DeviceVector<std::uint8_t>> mask) {
  auto out = std::make_shared<DeviceVector<I>>(n);
  auto count = std::make_shared<DeviceVector<I>>(1);
  auto plan = std::make_shared<kiln::prim::SelectIndices<I>>();
  auto kiln_temp = std::make_shared<DeviceVector<std::uint8_t>>(plan->temp_bytes(n));
  std::size_t cub_bytes = 0;
  check_cuda(cub::DeviceSelect::Flagged(nullptr, cub_bytes, thrust::counting_iterator<I>(0), mask->data(),
                                        out->data(), count->data(), std::int64_t(n)));
  auto cub_temp = std::make_shared<DeviceVector<std::uint8_t>>(cub_bytes);

  Row row;
  row.family = "select";
  row.type = kiln::prim::detail::type_suffix<I>();
  row.n = n;
  row.bytes = 0;  // G items/s: mask bytes examined per second
  row.kiln = [=](CUstream s) {
    (*plan)(mask->data(), out->data(), count->data(), n,
            kiln::prim::TempStorage{kiln_temp->data(), kiln_temp->size()}, s);
  };
  row.cub = [=](CUstream s) {
    std::size_t bytes = cub_temp->size();
    check_cuda(cub::DeviceSelect::Flagged(cub_temp->data(), bytes, thrust::counting_iterator<I>(0), mask->data(),
                                          out->data(), count->data(), std::int64_t(n), s));
  };
  row.release = [mask, out, count, kiln_temp, cub_temp, plan]() mutable {
    mask.reset(); out.reset(); count.reset(); kiln_temp.reset(); cub_temp.reset(); plan.reset();
  };
  return row;
}

}  // namespace

std::vector<Row> select_rows(std::size_t n) {
  auto mask = std::make_shared<DeviceVector<std::uint8_t>>(n);
  std::mt19937_64 rng(42);
  std::vector<std::uint8_t> h(n);
  for (auto& b : h) b = std::uint8_t(rng() & 1);
  mask->upload(h);
  return {select_row<std::int32_t>(n, mask), select_row<std::int64_t>(n, mask)};
}

}  // namespace kiln::bench
