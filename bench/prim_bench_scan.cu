// Exclusive sum, kiln's plan against cub::DeviceScan::ExclusiveSum.
#include "prim_bench.hpp"

#include <kiln/prim/scan.hpp>

#include <cub/device/device_scan.cuh>

#include <cstdint>
#include <memory>

#include "prim_bench_util.cuh"

namespace kiln::bench {
namespace {

template <typename T>
Row scan_row(std::size_t n) {
  auto in = std::make_shared<DeviceVector<T>>(n);
  auto out = std::make_shared<DeviceVector<T>>(n);
  fill_random(*in, T(-1000), T(1000));
  auto plan = std::make_shared<kiln::prim::ExclusiveSum<T>>();
  auto kiln_temp = std::make_shared<DeviceVector<std::uint8_t>>(plan->temp_bytes(n));
  std::size_t cub_bytes = 0;
  cub::DeviceScan::ExclusiveSum(nullptr, cub_bytes, in->data(), out->data(), int(n));
  auto cub_temp = std::make_shared<DeviceVector<std::uint8_t>>(cub_bytes);

  Row row;
  row.family = "exclusive_scan";
  row.type = kiln::prim::detail::type_suffix<T>();
  row.n = n;
  row.bytes = 2.0 * sizeof(T) * n;
  row.kiln = [=](CUstream s) {
    (*plan)(in->data(), out->data(), n, kiln::prim::TempStorage{kiln_temp->data(), kiln_temp->size()}, s);
  };
  row.cub = [=](CUstream s) {
    std::size_t bytes = cub_temp->size();
    check_cuda(cub::DeviceScan::ExclusiveSum(cub_temp->data(), bytes, in->data(), out->data(), int(n), s));
  };
  row.release = [in, out, kiln_temp, cub_temp, plan]() mutable { in.reset(); out.reset(); kiln_temp.reset(); cub_temp.reset(); plan.reset(); };
  return row;
}

}  // namespace

std::vector<Row> scan_rows(std::size_t n) { return {scan_row<std::int32_t>(n), scan_row<std::int64_t>(n)}; }

}  // namespace kiln::bench
