// Operators given at run time (kiln/prim/operator.hpp) against nvcc-compiled cub::Device* called with the
// same operator as an nvcc functor, on the same data: a float max-reduce, a wrapping int exclusive sum, a
// 64-bit running xor. Rates count the input items' bytes (reduce) or input and output bytes (scans).
#include "prim_bench.hpp"

#include <kiln/prim/operator.hpp>

#include <cub/device/device_reduce.cuh>
#include <cub/device/device_scan.cuh>

#include <cstdint>
#include <limits>
#include <memory>
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

}  // namespace

std::vector<Row> operator_rows(std::size_t n) {
  auto f32 = std::make_shared<DeviceVector<float>>(n);
  fill_random(*f32, -1000.0f, 1000.0f);
  return {max_reduce_row(n, f32), add_scan_row(n), xor_scan_row(n)};
}

}  // namespace kiln::bench
