// Sum and segmented sum/min/max: kiln's plans against cub::DeviceReduce::Sum and
// cub::DeviceSegmentedReduce::Sum/Min/Max, on the same data.
//
// Rates count the input items' bytes only (n * sizeof(T)), for both families. Segmented rows use one layout
// per n: segment lengths uniform in [0, 2000] (mean ~1000 items, empty segments included; fixed seed), the
// last cut to end at n; about n / 1000 segments.
#include "prim_bench.hpp"

#include <kiln/prim/reduce.hpp>
#include <kiln/prim/segmented_reduce.hpp>

#include <cub/device/device_reduce.cuh>
#include <cub/device/device_segmented_reduce.cuh>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "prim_bench_util.cuh"

namespace kiln::bench {
namespace {

using kiln::prim::ReduceOp;

template <typename T>
Row reduce_row(std::size_t n, std::shared_ptr<DeviceVector<T>> in) {
  auto out = std::make_shared<DeviceVector<T>>(1);
  auto plan = std::make_shared<kiln::prim::ReduceSum<T>>();
  auto kiln_temp = std::make_shared<DeviceVector<std::uint8_t>>(plan->temp_bytes(n));
  std::size_t cub_bytes = 0;
  check_cuda(cub::DeviceReduce::Sum(nullptr, cub_bytes, in->data(), out->data(), int(n)));
  auto cub_temp = std::make_shared<DeviceVector<std::uint8_t>>(cub_bytes);

  Row row;
  row.family = "reduce";
  row.type = kiln::prim::detail::type_suffix<T>();
  row.n = n;
  row.bytes = double(sizeof(T)) * double(n);
  row.kiln = [=](CUstream s) {
    (*plan)(in->data(), out->data(), n, kiln::prim::TempStorage{kiln_temp->data(), kiln_temp->size()}, s);
  };
  row.cub = [=](CUstream s) {
    std::size_t bytes = cub_temp->size();
    check_cuda(cub::DeviceReduce::Sum(cub_temp->data(), bytes, in->data(), out->data(), int(n), s));
  };
  row.release = [in, out, kiln_temp, cub_temp, plan]() mutable {
    in.reset(), out.reset(), kiln_temp.reset(), cub_temp.reset(), plan.reset();
  };
  return row;
}

// cub::DeviceSegmentedReduce's entry point for Op.
template <ReduceOp Op, typename T>
cudaError_t cub_segmented(void* temp, std::size_t& bytes, T* in, T* out, std::int64_t segments, int* offsets,
                          cudaStream_t s) {
  if constexpr (Op == ReduceOp::sum) {
    return cub::DeviceSegmentedReduce::Sum(temp, bytes, in, out, segments, offsets, offsets + 1, s);
  } else if constexpr (Op == ReduceOp::min) {
    return cub::DeviceSegmentedReduce::Min(temp, bytes, in, out, segments, offsets, offsets + 1, s);
  } else {
    return cub::DeviceSegmentedReduce::Max(temp, bytes, in, out, segments, offsets, offsets + 1, s);
  }
}

constexpr const char* op_name(ReduceOp op) { return op == ReduceOp::sum ? "sum" : op == ReduceOp::min ? "min" : "max"; }

template <typename T, ReduceOp Op>
Row segmented_row(std::size_t n, std::shared_ptr<DeviceVector<T>> in, std::shared_ptr<DeviceVector<int>> offsets) {
  const std::size_t segments = offsets->size() - 1;
  auto out = std::make_shared<DeviceVector<T>>(segments);
  auto plan = std::make_shared<kiln::prim::SegmentedReduce<T, Op>>();
  auto kiln_temp = std::make_shared<DeviceVector<std::uint8_t>>(plan->temp_bytes(segments));
  std::size_t cub_bytes = 0;
  check_cuda(cub_segmented<Op>(nullptr, cub_bytes, in->data(), out->data(), std::int64_t(segments), offsets->data(),
                               nullptr));
  auto cub_temp = std::make_shared<DeviceVector<std::uint8_t>>(cub_bytes);

  Row row;
  row.family = "segmented_reduce";
  row.type = std::string(op_name(Op)) + "_" + kiln::prim::detail::type_suffix<T>();
  row.n = n;
  row.bytes = double(sizeof(T)) * double(n);
  row.kiln = [=](CUstream s) {
    (*plan)(in->data(), out->data(), segments, offsets->data(),
            kiln::prim::TempStorage{kiln_temp->data(), kiln_temp->size()}, s);
  };
  row.cub = [=](CUstream s) {
    std::size_t bytes = cub_temp->size();
    check_cuda(cub_segmented<Op>(cub_temp->data(), bytes, in->data(), out->data(), std::int64_t(segments),
                                 offsets->data(), s));
  };
  row.release = [in, out, offsets, kiln_temp, cub_temp, plan]() mutable {
    in.reset(), out.reset(), offsets.reset(), kiln_temp.reset(), cub_temp.reset(), plan.reset();
  };
  return row;
}

// Segment lengths uniform in [0, 2000], the last cut to end at n.
std::shared_ptr<DeviceVector<int>> segment_offsets(std::size_t n) {
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int> length(0, 2000);
  std::vector<int> h{0};
  while (std::size_t(h.back()) < n) h.push_back(int(std::min<std::size_t>(n, std::size_t(h.back()) + length(rng))));
  auto offsets = std::make_shared<DeviceVector<int>>(h.size());
  offsets->upload(h);
  return offsets;
}

}  // namespace

std::vector<Row> reduce_rows(std::size_t n) {
  // One input per type, shared by its rows (freed with the last of them).
  auto f64 = std::make_shared<DeviceVector<double>>(n);
  fill_random(*f64, -1000.0, 1000.0);
  auto i32 = std::make_shared<DeviceVector<std::int32_t>>(n);
  fill_random(*i32, std::int32_t(-1000), std::int32_t(1000));
  auto offsets = segment_offsets(n);
  return {reduce_row<double>(n, f64),
          reduce_row<std::int32_t>(n, i32),
          segmented_row<std::int32_t, ReduceOp::sum>(n, i32, offsets),
          segmented_row<double, ReduceOp::sum>(n, f64, offsets),
          segmented_row<double, ReduceOp::min>(n, f64, offsets),
          segmented_row<double, ReduceOp::max>(n, f64, offsets)};
}

}  // namespace kiln::bench
