// Segmented sort (keys only), kiln's plan against
// cub::DeviceSegmentedSort::SortKeys, in two layouts: segments of 1 to 1999 items (the partitioned path:
// three-way partition, then the large and small/medium kernels), and 64 huge segments (the fallback kernel,
// one block per segment, radix passes through global memory).
//
// SortKeys with separate in/out never writes its input, so no reset is needed between runs.
#include "prim_bench.hpp"

#include <kiln/prim/segmented_sort.hpp>

#include <cub/device/device_segmented_sort.cuh>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "prim_bench_util.cuh"

namespace kiln::bench {
namespace {

// Offsets of segments of uniformly random lengths in [1, 2 * mean - 1] covering n items.
std::vector<int> random_offsets(std::size_t n, std::size_t mean, unsigned seed = 7) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::size_t> length(1, 2 * mean - 1);
  std::vector<int> offsets{0};
  for (std::size_t at = 0; at < n;) {
    at = std::min(n, at + length(rng));
    offsets.push_back(int(at));
  }
  return offsets;
}

template <typename K>
Row segmented_sort_row(std::size_t n, const std::vector<int>& h_offsets, const char* layout) {
  auto in = std::make_shared<DeviceVector<K>>(n);
  auto out = std::make_shared<DeviceVector<K>>(n);
  if constexpr (std::is_floating_point_v<K>) {
    fill_random(*in, K(-1e6), K(1e6));
  } else {
    fill_random(*in, std::numeric_limits<K>::min(), std::numeric_limits<K>::max());
  }
  const std::size_t segments = h_offsets.size() - 1;
  auto offsets = std::make_shared<DeviceVector<int>>(h_offsets.size());
  offsets->upload(h_offsets);
  auto plan = std::make_shared<kiln::prim::SegmentedSort<K>>();
  auto kiln_temp = std::make_shared<DeviceVector<std::uint8_t>>(plan->temp_bytes(n, segments));
  std::size_t cub_bytes = 0;
  check_cuda(cub::DeviceSegmentedSort::SortKeys(nullptr, cub_bytes, in->data(), out->data(), std::int64_t(n),
                                                std::int64_t(segments), offsets->data(), offsets->data() + 1));
  auto cub_temp = std::make_shared<DeviceVector<std::uint8_t>>(cub_bytes);

  Row row;
  row.family = "segmented_sort";
  row.type = std::string(kiln::prim::detail::type_suffix<K>()) + ", " + layout;
  row.n = n;
  row.kiln = [=](CUstream s) {
    (*plan)(in->data(), out->data(), n, segments, offsets->data(),
            kiln::prim::TempStorage{kiln_temp->data(), kiln_temp->size()}, s);
  };
  row.cub = [=](CUstream s) {
    std::size_t bytes = cub_temp->size();
    check_cuda(cub::DeviceSegmentedSort::SortKeys(cub_temp->data(), bytes, in->data(), out->data(), std::int64_t(n),
                                                  std::int64_t(segments), offsets->data(), offsets->data() + 1, s));
  };
  row.release = [in, out, offsets, kiln_temp, cub_temp, plan]() mutable {
    in.reset(); out.reset(); offsets.reset(); kiln_temp.reset(); cub_temp.reset(); plan.reset();
  };
  return row;
}

}  // namespace

std::vector<Row> segmented_sort_rows(std::size_t n) {
  const auto mid = random_offsets(n, 1000);
  const auto huge = equal_offsets(n, 64);
  return {segmented_sort_row<std::int32_t>(n, mid, "segments ~1000"),
          segmented_sort_row<double>(n, mid, "segments ~1000"),
          segmented_sort_row<std::int32_t>(n, huge, "64 segments"),
          segmented_sort_row<double>(n, huge, "64 segments")};
}

}  // namespace kiln::bench
