// Transform<T, R, Op, In>: the kernel of a kiln.transform row of any registry, run as
// cub::DeviceTransform::Transform runs it. Header-only; include it from a .cu file nvcc compiles (CUB's
// host code does not compile with g++), with kiln's primitive headers on the include path
// (dependency('kiln_prim_headers')).
//
// CCCL 3.0.1's dispatch_t cannot take kiln's launcher on its bulk-copy path (configure_ublkcp_kernel
// names thrust's triple_chevron as the launcher's type), so the plan follows dispatch_t's two paths step
// for step (dispatch_transform.cuh: invoke_prefetch_algorithm, configure_ublkcp_kernel): the policy for
// the loaded binary's arch, the items per thread the same bytes-in-flight rule gives, the same shared
// memory and the same kernel arguments. The device queries CUB makes (and caches for the process) are
// made when the plan is built.
#pragma once

#include <kiln/config.hpp>  // C++20, checked first

#include <kiln/prim/common.hpp>
#include <kiln/prim/detail/cub_launch.cuh>
#include <kiln/prim/detail/plan.hpp>

#include <kiln_prim/transform.cuh>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace kiln::prim {
namespace detail {

// The policy's numbers for the loaded binary's arch, and the device's answers, read once per plan.
struct TransformConfig {
  bool bulk_copy = false;  // Algorithm::ublkcp (sm_90 and later, contiguous input), else prefetch
  int block_threads = 0;
  int min_items = 0, max_items = 0;  // per thread, the policy's bounds
  int min_bif = 0;                   // bytes in flight per SM the policy aims at
  int loaded_bytes = 0;              // bytes one item loads (loaded_bytes_per_iteration)
  int sm_count = 0;
  int occupancy = 0;  // prefetch: blocks per SM without shared memory
  // Bulk copy: for items per thread min_items + i, the shared memory a tile takes and the blocks per SM
  // then; cut where a tile would take more than the device's shared memory per block.
  std::vector<int> tile_smem, tile_occupancy;
};

template <typename Types>
struct TransformPolicy {
  TransformConfig* config;
  template <typename ActivePolicy>
  cudaError_t Invoke() {
    using algo = typename ActivePolicy::algo_policy;
    config->bulk_copy = ActivePolicy::algorithm != cub::detail::transform::Algorithm::prefetch;
    config->block_threads = algo::block_threads;
    config->min_items = algo::min_items_per_thread;
    config->max_items = algo::max_items_per_thread;
    config->min_bif = ActivePolicy::min_bif;
    return cudaSuccess;
  }
};

template <typename Types>
TransformConfig transform_config(Registry& registry, CUdevice device, const Kernel& kernel, const std::string& unit) {
  TransformConfig c;
  TransformPolicy<Types> policy{&c};
  RuntimePolicy<typename Types::max_policy>::Invoke(int(kernel.provenance.arch) * 10, policy);
  c.loaded_bytes = cub::detail::transform::loaded_bytes_per_iteration<typename Types::input_t>();
  ContextScope scope(registry);
  LaunchStatus status;
  const LauncherFactory factory(device, kernel.provenance.arch, &status);
  factory.MultiProcessorCount(c.sm_count);
  if (!c.bulk_copy) {
    factory.MaxSmOccupancy(c.occupancy, ref(kernel), c.block_threads, 0);
  } else if constexpr (std::is_pointer_v<typename Types::input_t>) {  // CUB's policy: bulk copy only from memory
    // configure_ublkcp_kernel's bound: the shared memory per block cudaDevAttrMaxSharedMemoryPerBlock says.
    int max_smem = 0;
    status.record(driver().cuDeviceGetAttribute(&max_smem, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, device),
                  {}, "cuDeviceGetAttribute(MAX_SHARED_MEMORY_PER_BLOCK)");
    for (int items = c.min_items; items < c.max_items; ++items) {
      const int smem =
          cub::detail::transform::bulk_copy_smem_for_tile_size<typename Types::input_t>(c.block_threads * items);
      if (smem > max_smem) break;
      int occupancy = 0;
      factory.MaxSmOccupancy(occupancy, ref(kernel), c.block_threads, smem);
      c.tile_smem.push_back(smem);
      c.tile_occupancy.push_back(occupancy);
    }
    if (c.tile_smem.empty() && status.result == CUDA_SUCCESS) {
      throw Error(Errc::driver, "kiln::prim::" + unit + ": a tile of " + std::to_string(c.min_items) +
                                    " items per thread takes more shared memory than the device has per block (" +
                                    std::to_string(max_smem) + " bytes); give the row a smaller T, or use a "
                                    "device with at least the 48 KiB per block CUB's policy assumes");
    }
  }
  check_dispatch(cudaSuccess, status, unit);
  return c;
}

// The launch of n items: grid, block, shared memory and items per thread, as dispatch_t computes them.
struct TransformLaunch {
  unsigned grid = 0;
  int block = 0, smem = 0, items_per_thread = 0;
};

inline TransformLaunch transform_launch(const TransformConfig& c, std::int64_t n) {
  TransformLaunch l;
  l.block = c.block_threads;
  if (c.bulk_copy) {
    // configure_ublkcp_kernel's determine_element_counts: more items per thread until a tile covers n or the
    // SMs have the bytes in flight the policy asks for; the last that fits the shared memory otherwise.
    std::size_t pick = c.tile_smem.size() - 1;
    for (std::size_t i = 0; i < c.tile_smem.size(); ++i) {
      const std::int64_t tile = std::int64_t{c.block_threads} * (c.min_items + int(i));
      if (tile >= n || std::int64_t{c.min_bif} <= std::int64_t{c.tile_occupancy[i]} * tile * c.loaded_bytes) {
        pick = i;
        break;
      }
    }
    l.items_per_thread = c.min_items + int(pick);
    l.smem = c.tile_smem[pick];
  } else {
    // invoke_prefetch_algorithm: enough items per thread for the bytes in flight, but spread over every SM
    // for small inputs, within the policy's bounds.
    const int occupancy = std::max(c.occupancy, 1);
    const int items = (c.min_bif + occupancy * c.block_threads * c.loaded_bytes - 1) /
                      (occupancy * c.block_threads * c.loaded_bytes);
    const auto spread = static_cast<int>(
        std::min<std::int64_t>(items, n / (std::int64_t{c.sm_count} * c.block_threads * occupancy)));
    l.items_per_thread = std::clamp(spread, c.min_items, c.max_items);
  }
  const std::int64_t tile = std::int64_t{l.block} * l.items_per_thread;
  l.grid = static_cast<unsigned>((n + tile - 1) / tile);
  return l;
}

}  // namespace detail

// out[i] = op(in[i]) for i < n (cub::DeviceTransform::Transform): in and out are device pointers; out may
// be in (in place) but must not overlap it otherwise. The registry's unit must be a kiln.transform row with
// params T, R, Op and In naming these same types. In: the input iterator (kiln_prim/iterators.cuh), void
// for const T*. No temporary storage. n up to 2^63 - 1.
template <typename T, typename R, typename Op, typename In = void>
class Transform : detail::PlanBase {
  using Types = kiln_prim::transform<T, R, Op, In>;

 public:
  using input_type = typename Types::input_t;  // const T*, or In

  // `link`: the unit is a linked row, and this is the operator linked into it (kiln/prim/operator.hpp).
  Transform(Registry& registry, std::string_view unit, const LinkedSource* link = nullptr)
      : PlanBase(registry, unit),
        kernel_(detail::get_kernel(registry, unit_ + "_kernel", link)),
        config_(detail::transform_config<Types>(registry, device_, kernel_, unit_)) {}

  // Thread-safe: a plan's calls only read it.
  void operator()(input_type in, R* out, std::size_t n, CUstream stream = nullptr, Op op = {}) const {
    if (n == 0) return;
    if (n > std::size_t(std::numeric_limits<std::int64_t>::max())) {
      throw kiln::Error(kiln::Errc::invalid_argument, "kiln::prim::" + unit_ + ": " + std::to_string(n) + " items is more than 2^63 - 1");
    }
    const auto count = static_cast<typename Types::offset_t>(n);
    const detail::TransformLaunch l = detail::transform_launch(config_, count);
    detail::ContextScope scope(*registry_);
    detail::LaunchStatus status;
    const detail::LauncherFactory factory(device_, kernel_.provenance.arch, &status);
    typename Types::output_t output = out;
    // The bulk copy reads the input through a pointer aligned down to 128 bytes and an offset; prefetch
    // reads it as it is (make_aligned_base_ptr_kernel_arg, make_iterator_kernel_arg).
    const auto input = [&] {
      if constexpr (std::is_pointer_v<input_type>) {
        if (config_.bulk_copy) {
          return cub::detail::transform::make_aligned_base_ptr_kernel_arg(in, cub::detail::transform::bulk_copy_alignment);
        }
      }
      return cub::detail::transform::make_iterator_kernel_arg(in);
    }();
    const cudaError_t returned = factory(dim3(l.grid), dim3(l.block), std::size_t(l.smem), stream)
                                     .doit(detail::ref(kernel_), count, l.items_per_thread, op, output, input);
    detail::check_dispatch(returned, status, unit_);
  }

  // Storage a call needs: none (the shape every plan has).
  std::size_t temp_bytes(std::size_t) const { return 0; }

  // Items per tile (block threads times items per thread) for a large input, under the policy for the
  // loaded binary's architecture.
  std::size_t tile_items() const {
    const detail::TransformLaunch l = detail::transform_launch(config_, std::int64_t{1} << 40);
    return std::size_t(l.block) * std::size_t(l.items_per_thread);
  }

  // Where the kernel came from (embedded, disk, JIT) and the arch of its binary.
  const Kernel& kernel() const { return kernel_; }

 private:
  Kernel kernel_;
  detail::TransformConfig config_;
};

}  // namespace kiln::prim
