// Operators given at run time (kiln/prim/operator.hpp) against nvcc-compiled cub::Device* called with the
// same operator as an nvcc functor, on the same data: a float max-reduce, a wrapping int exclusive sum, a
// 64-bit running xor, a descending merge sort of (float, int) pairs, a select of multiples of 3, a unique
// by key with keys equal within a tens, a segmented max over segments of about 1000 items, a sum of
// squares through a transform iterator (cub::DeviceReduce::TransformReduce), a transform y = 3x - 7 of
// 64-bit integers (cub::DeviceTransform::Transform, 64-bit item count). Rates count the input items' bytes
// (reduce, select, segmented reduce) or input and output bytes (scans, transform); the sort's and the
// unique's G items/s.
#include "prim_bench.hpp"

#include <kiln/prim/operator.hpp>

#include <cub/device/device_merge_sort.cuh>
#include <cub/device/device_reduce.cuh>
#include <cub/device/device_segmented_reduce.cuh>
#include <cub/device/device_scan.cuh>
#include <cub/device/device_select.cuh>
#include <cub/device/device_transform.cuh>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "prim_bench_util.cuh"

namespace kiln::bench {
namespace {

// The operators, as the kiln side is given them (text) and as nvcc compiles them for CUB (functors).
constexpr const char* kMaxText = "__device__ float op(float a, float b) { return a > b ? a : b; }";
struct MaxF {
  __device__ float operator()(float a, float b) const { return a > b ? a : b; }
};
constexpr const char* kAddText = "__device__ int op(int a, int b) { return int(unsigned(a) + unsigned(b)); }";
struct AddI {
  __device__ int operator()(int a, int b) const { return int(unsigned(a) + unsigned(b)); }
};
constexpr const char* kXorText =
    "__device__ unsigned long long op(unsigned long long a, unsigned long long b) { return a ^ b; }";
struct XorU {
  __device__ unsigned long long operator()(unsigned long long a, unsigned long long b) const { return a ^ b; }
};

constexpr const char* kGreaterText = "__device__ bool op(float a, float b) { return a > b; }";
struct GreaterF {
  __device__ bool operator()(float a, float b) const { return a > b; }
};
constexpr const char* kThirdText = "__device__ bool op(long long x) { return x % 3 == 0; }";
struct ThirdI {
  __device__ bool operator()(long long x) const { return x % 3 == 0; }
};

constexpr const char* kTensText = "__device__ bool op(int a, int b) { return a / 10 == b / 10; }";
struct TensI {
  __device__ bool operator()(int a, int b) const { return a / 10 == b / 10; }
};
constexpr const char* kMaxDText = "__device__ double op(double a, double b) { return a > b ? a : b; }";
struct MaxD {
  __device__ double operator()(double a, double b) const { return a > b ? a : b; }
};

constexpr const char* kSquareText = "__device__ double sq(double x) { return x * x; }";
constexpr const char* kSumDText = "__device__ double op(double a, double b) { return a + b; }";
struct SquareD {
  __device__ double operator()(double x) const { return x * x; }
};
struct SumD {
  __device__ double operator()(double a, double b) const { return a + b; }
};

constexpr const char* kAffineText = "__device__ long long op(long long x) { return 3 * x - 7; }";
struct AffineI {
  __device__ std::int64_t operator()(std::int64_t x) const { return 3 * x - 7; }
};

Row max_reduce_row(std::size_t n, std::shared_ptr<DeviceVector<float>> in) {
  const float lowest = -std::numeric_limits<float>::infinity();
  auto out = std::make_shared<DeviceVector<float>>(1);
  auto plan = std::make_shared<kiln::prim::ReduceWith<float>>(kiln::prim::Operator{kMaxText});
  auto kiln_temp = std::make_shared<DeviceVector<std::uint8_t>>(plan->temp_bytes(n));
  std::size_t cub_bytes = 0;
  check_cuda(cub::DeviceReduce::Reduce(nullptr, cub_bytes, in->data(), out->data(), int(n), MaxF{}, lowest));
  auto cub_temp = std::make_shared<DeviceVector<std::uint8_t>>(cub_bytes);
  Row row;
  row.family = "reduce (run-time max)";
  row.type = "f32";
  row.n = n;
  row.bytes = double(sizeof(float)) * double(n);
  row.kiln = [=](CUstream s) {
    (*plan)(in->data(), out->data(), n, lowest, kiln::prim::TempStorage{kiln_temp->data(), kiln_temp->size()}, s);
  };
  row.cub = [=](CUstream s) {
    std::size_t bytes = cub_temp->size();
    check_cuda(cub::DeviceReduce::Reduce(cub_temp->data(), bytes, in->data(), out->data(), int(n), MaxF{}, lowest, s));
  };
  row.release = [in, out, kiln_temp, cub_temp, plan]() mutable {
    in.reset(), out.reset(), kiln_temp.reset(), cub_temp.reset(), plan.reset();
  };
  return row;
}

Row add_scan_row(std::size_t n) {
  auto in = std::make_shared<DeviceVector<std::int32_t>>(n);
  fill_random(*in, std::int32_t(-1000), std::int32_t(1000));
  auto out = std::make_shared<DeviceVector<std::int32_t>>(n);
  auto plan = std::make_shared<kiln::prim::ExclusiveScanWith<std::int32_t>>(kiln::prim::Operator{kAddText});
  auto kiln_temp = std::make_shared<DeviceVector<std::uint8_t>>(plan->temp_bytes(n));
  std::size_t cub_bytes = 0;
  check_cuda(cub::DeviceScan::ExclusiveScan(nullptr, cub_bytes, in->data(), out->data(), AddI{}, 0, int(n)));
  auto cub_temp = std::make_shared<DeviceVector<std::uint8_t>>(cub_bytes);
  Row row;
  row.family = "exclusive_scan (run-time add)";
  row.type = "i32";
  row.n = n;
  row.bytes = 2.0 * double(sizeof(std::int32_t)) * double(n);
  row.kiln = [=](CUstream s) {
    (*plan)(in->data(), out->data(), n, 0, kiln::prim::TempStorage{kiln_temp->data(), kiln_temp->size()}, s);
  };
  row.cub = [=](CUstream s) {
    std::size_t bytes = cub_temp->size();
    check_cuda(cub::DeviceScan::ExclusiveScan(cub_temp->data(), bytes, in->data(), out->data(), AddI{}, 0, int(n), s));
  };
  row.release = [in, out, kiln_temp, cub_temp, plan]() mutable {
    in.reset(), out.reset(), kiln_temp.reset(), cub_temp.reset(), plan.reset();
  };
  return row;
}

Row xor_scan_row(std::size_t n) {
  using U = unsigned long long;
  auto in = std::make_shared<DeviceVector<U>>(n);
  fill_random(*in, U(0), std::numeric_limits<U>::max());
  auto out = std::make_shared<DeviceVector<U>>(n);
  auto plan = std::make_shared<kiln::prim::InclusiveScanWith<std::uint64_t>>(kiln::prim::Operator{kXorText});
  auto kiln_temp = std::make_shared<DeviceVector<std::uint8_t>>(plan->temp_bytes(n));
  std::size_t cub_bytes = 0;
  check_cuda(cub::DeviceScan::InclusiveScan(nullptr, cub_bytes, in->data(), out->data(), XorU{}, int(n)));
  auto cub_temp = std::make_shared<DeviceVector<std::uint8_t>>(cub_bytes);
  Row row;
  row.family = "inclusive_scan (run-time xor)";
  row.type = "u64";
  row.n = n;
  row.bytes = 2.0 * double(sizeof(U)) * double(n);
  row.kiln = [=](CUstream s) {
    (*plan)(reinterpret_cast<const std::uint64_t*>(in->data()), reinterpret_cast<std::uint64_t*>(out->data()), n,
            kiln::prim::TempStorage{kiln_temp->data(), kiln_temp->size()}, s);
  };
  row.cub = [=](CUstream s) {
    std::size_t bytes = cub_temp->size();
    check_cuda(cub::DeviceScan::InclusiveScan(cub_temp->data(), bytes, in->data(), out->data(), XorU{}, int(n), s));
  };
  row.release = [in, out, kiln_temp, cub_temp, plan]() mutable {
    in.reset(), out.reset(), kiln_temp.reset(), cub_temp.reset(), plan.reset();
  };
  return row;
}

// Each timed run sorts a fresh copy of the unsorted pairs in place (row.reset, not timed).
Row descending_sort_row(std::size_t n) {
  auto keys0 = std::make_shared<DeviceVector<float>>(n);
  auto values0 = std::make_shared<DeviceVector<std::int32_t>>(n);
  auto keys = std::make_shared<DeviceVector<float>>(n);
  auto values = std::make_shared<DeviceVector<std::int32_t>>(n);
  fill_random(*keys0, -1e6f, 1e6f);
  std::vector<std::int32_t> positions(n);
  std::iota(positions.begin(), positions.end(), 0);
  values0->upload(positions);
  auto plan = std::make_shared<kiln::prim::MergeSortPairsWith<float>>(kiln::prim::Operator{kGreaterText});
  auto kiln_temp = std::make_shared<DeviceVector<std::uint8_t>>(plan->temp_bytes(n));
  std::size_t cub_bytes = 0;
  check_cuda(cub::DeviceMergeSort::SortPairs(nullptr, cub_bytes, keys->data(), values->data(), int(n), GreaterF{}));
  auto cub_temp = std::make_shared<DeviceVector<std::uint8_t>>(cub_bytes);
  Row row;
  row.family = "merge_sort (run-time greater)";
  row.type = "f32+i32";
  row.n = n;
  row.kiln = [=](CUstream s) {
    (*plan)(keys->data(), values->data(), n, kiln::prim::TempStorage{kiln_temp->data(), kiln_temp->size()}, s);
  };
  row.cub = [=](CUstream s) {
    std::size_t bytes = cub_temp->size();
    check_cuda(cub::DeviceMergeSort::SortPairs(cub_temp->data(), bytes, keys->data(), values->data(), int(n),
                                               GreaterF{}, s));
  };
  row.reset = [=](CUstream s) {
    keys->copy_from(*keys0, s);
    values->copy_from(*values0, s);
  };
  row.release = [keys0, values0, keys, values, kiln_temp, cub_temp, plan]() mutable {
    keys0.reset(), values0.reset(), keys.reset(), values.reset(), kiln_temp.reset(), cub_temp.reset(), plan.reset();
  };
  return row;
}

Row select_row(std::size_t n) {
  using I = long long;
  auto in = std::make_shared<DeviceVector<I>>(n);
  fill_random(*in, I(-1000000), I(1000000));
  auto out = std::make_shared<DeviceVector<I>>(n);
  auto count = std::make_shared<DeviceVector<I>>(1);
  auto plan = std::make_shared<kiln::prim::SelectIfWith<std::int64_t>>(kiln::prim::Operator{kThirdText});
  auto kiln_temp = std::make_shared<DeviceVector<std::uint8_t>>(plan->temp_bytes(n));
  std::size_t cub_bytes = 0;
  check_cuda(cub::DeviceSelect::If(nullptr, cub_bytes, in->data(), out->data(), count->data(), std::int64_t(n),
                                   ThirdI{}));
  auto cub_temp = std::make_shared<DeviceVector<std::uint8_t>>(cub_bytes);
  Row row;
  row.family = "select (run-time predicate)";
  row.type = "i64";
  row.n = n;
  row.bytes = double(sizeof(I)) * double(n);
  row.kiln = [=](CUstream s) {
    (*plan)(reinterpret_cast<const std::int64_t*>(in->data()), reinterpret_cast<std::int64_t*>(out->data()),
            reinterpret_cast<std::int64_t*>(count->data()), n,
            kiln::prim::TempStorage{kiln_temp->data(), kiln_temp->size()}, s);
  };
  row.cub = [=](CUstream s) {
    std::size_t bytes = cub_temp->size();
    check_cuda(cub::DeviceSelect::If(cub_temp->data(), bytes, in->data(), out->data(), count->data(),
                                     std::int64_t(n), ThirdI{}, s));
  };
  row.release = [in, out, count, kiln_temp, cub_temp, plan]() mutable {
    in.reset(), out.reset(), count.reset(), kiln_temp.reset(), cub_temp.reset(), plan.reset();
  };
  return row;
}

// Sorted keys with runs of about 3 items under the tens equality (keys 0 .. n/3).
Row unique_row(std::size_t n) {
  std::vector<std::int32_t> host(n);
  for (std::size_t i = 0; i < n; ++i) host[i] = std::int32_t(i / 3);
  auto keys = std::make_shared<DeviceVector<std::int32_t>>(n);
  keys->upload(host);
  auto values = std::make_shared<DeviceVector<std::int32_t>>(n);
  values->upload(host);
  auto keys_out = std::make_shared<DeviceVector<std::int32_t>>(n);
  auto values_out = std::make_shared<DeviceVector<std::int32_t>>(n);
  auto count = std::make_shared<DeviceVector<std::uint64_t>>(1);
  auto plan = std::make_shared<kiln::prim::UniqueByKeyWith<std::int32_t>>(kiln::prim::Operator{kTensText});
  auto kiln_temp = std::make_shared<DeviceVector<std::uint8_t>>(plan->temp_bytes(n));
  std::size_t cub_bytes = 0;
  check_cuda(cub::DeviceSelect::UniqueByKey(nullptr, cub_bytes, keys->data(), values->data(), keys_out->data(),
                                            values_out->data(), count->data(), int(n), TensI{}));
  auto cub_temp = std::make_shared<DeviceVector<std::uint8_t>>(cub_bytes);
  Row row;
  row.family = "unique_by_key (run-time equality)";
  row.type = "i32+i32";
  row.n = n;
  row.kiln = [=](CUstream s) {
    (*plan)(keys->data(), values->data(), keys_out->data(), values_out->data(), count->data(), n,
            kiln::prim::TempStorage{kiln_temp->data(), kiln_temp->size()}, s);
  };
  row.cub = [=](CUstream s) {
    std::size_t bytes = cub_temp->size();
    check_cuda(cub::DeviceSelect::UniqueByKey(cub_temp->data(), bytes, keys->data(), values->data(), keys_out->data(),
                                              values_out->data(), count->data(), int(n), TensI{}, s));
  };
  row.release = [keys, values, keys_out, values_out, count, kiln_temp, cub_temp, plan]() mutable {
    keys.reset(), values.reset(), keys_out.reset(), values_out.reset(), count.reset(), kiln_temp.reset(),
        cub_temp.reset(), plan.reset();
  };
  return row;
}

Row segmented_max_row(std::size_t n) {
  const std::size_t segments = std::max<std::size_t>(1, n / 1000);
  auto in = std::make_shared<DeviceVector<double>>(n);
  fill_random(*in, -1e6, 1e6);
  auto offsets = std::make_shared<DeviceVector<std::int32_t>>(segments + 1);
  offsets->upload(equal_offsets(n, segments));
  auto out = std::make_shared<DeviceVector<double>>(segments);
  const double init = -std::numeric_limits<double>::infinity();
  auto plan = std::make_shared<kiln::prim::SegmentedReduceWith<double>>(kiln::prim::Operator{kMaxDText});
  auto kiln_temp = std::make_shared<DeviceVector<std::uint8_t>>(std::max<std::size_t>(1, plan->temp_bytes(segments)));
  std::size_t cub_bytes = 0;
  check_cuda(cub::DeviceSegmentedReduce::Reduce(nullptr, cub_bytes, in->data(), out->data(), std::int64_t(segments),
                                                offsets->data(), offsets->data() + 1, MaxD{}, init));
  auto cub_temp = std::make_shared<DeviceVector<std::uint8_t>>(std::max<std::size_t>(1, cub_bytes));
  Row row;
  row.family = "segmented_reduce (run-time max)";
  row.type = "f64";
  row.n = n;
  row.bytes = double(sizeof(double)) * double(n);
  row.kiln = [=](CUstream s) {
    (*plan)(in->data(), out->data(), segments, offsets->data(), init,
            kiln::prim::TempStorage{kiln_temp->data(), kiln_temp->size()}, s);
  };
  row.cub = [=](CUstream s) {
    std::size_t bytes = cub_temp->size();
    check_cuda(cub::DeviceSegmentedReduce::Reduce(cub_temp->data(), bytes, in->data(), out->data(),
                                                  std::int64_t(segments), offsets->data(), offsets->data() + 1, MaxD{},
                                                  init, s));
  };
  row.release = [in, offsets, out, kiln_temp, cub_temp, plan]() mutable {
    in.reset(), offsets.reset(), out.reset(), kiln_temp.reset(), cub_temp.reset(), plan.reset();
  };
  return row;
}

Row sum_of_squares_row(std::size_t n) {
  auto in = std::make_shared<DeviceVector<double>>(n);
  fill_random(*in, -1.0, 1.0);
  auto out = std::make_shared<DeviceVector<double>>(1);
  auto plan = std::make_shared<kiln::prim::TransformReduceWith<double>>(kiln::prim::Operator{kSquareText, "sq"},
                                                                        kiln::prim::Operator{kSumDText});
  auto kiln_temp = std::make_shared<DeviceVector<std::uint8_t>>(plan->temp_bytes(n));
  std::size_t cub_bytes = 0;
  check_cuda(cub::DeviceReduce::TransformReduce(nullptr, cub_bytes, in->data(), out->data(), int(n), SumD{}, SquareD{},
                                                0.0));
  auto cub_temp = std::make_shared<DeviceVector<std::uint8_t>>(cub_bytes);
  Row row;
  row.family = "transform_reduce (run-time square, sum)";
  row.type = "f64";
  row.n = n;
  row.bytes = double(sizeof(double)) * double(n);
  row.kiln = [=](CUstream s) {
    (*plan)(in->data(), out->data(), n, 0.0, kiln::prim::TempStorage{kiln_temp->data(), kiln_temp->size()}, s);
  };
  row.cub = [=](CUstream s) {
    std::size_t bytes = cub_temp->size();
    check_cuda(cub::DeviceReduce::TransformReduce(cub_temp->data(), bytes, in->data(), out->data(), int(n), SumD{},
                                                  SquareD{}, 0.0, s));
  };
  row.release = [in, out, kiln_temp, cub_temp, plan]() mutable {
    in.reset(), out.reset(), kiln_temp.reset(), cub_temp.reset(), plan.reset();
  };
  return row;
}

Row affine_transform_row(std::size_t n) {
  auto in = std::make_shared<DeviceVector<std::int64_t>>(n);
  fill_random(*in, std::int64_t{-1000000}, std::int64_t{1000000});
  auto out = std::make_shared<DeviceVector<std::int64_t>>(n);
  auto plan = std::make_shared<kiln::prim::TransformWith<std::int64_t>>(kiln::prim::Operator{kAffineText});
  Row row;
  row.family = "transform (run-time 3x - 7)";
  row.type = "i64";
  row.n = n;
  row.bytes = 2.0 * double(sizeof(std::int64_t)) * double(n);
  row.kiln = [=](CUstream s) { (*plan)(in->data(), out->data(), n, s); };
  row.cub = [=](CUstream s) {
    check_cuda(cub::DeviceTransform::Transform(in->data(), out->data(), std::int64_t(n), AffineI{}, s));
  };
  row.release = [in, out, plan]() mutable { in.reset(), out.reset(), plan.reset(); };
  return row;
}

}  // namespace

std::vector<Row> operator_rows(std::size_t n) {
  auto f32 = std::make_shared<DeviceVector<float>>(n);
  fill_random(*f32, -1000.0f, 1000.0f);
  return {max_reduce_row(n, f32), add_scan_row(n),  xor_scan_row(n),     descending_sort_row(n),
          select_row(n),          unique_row(n),    segmented_max_row(n), sum_of_squares_row(n),
          affine_transform_row(n)};
}

}  // namespace kiln::bench
