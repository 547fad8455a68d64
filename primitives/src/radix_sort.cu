// RadixSortPairs<K>: kiln's copy of CUB's host dispatch for radix sort, launching the
// registry's radix_sort_pairs_<K> kernels.
//
// CUB 3.0.1's DispatchRadixSort takes no KernelSource or launcher factory (it names its kernels and
// launches them with <<<>>>), so this file mirrors DispatchRadixSort::Invoke, InvokeSingleTile and
// InvokeOnesweep (cub/device/dispatch/dispatch_radix_sort.cuh) step for step: the same kernels, grids,
// argument lists, temporary storage layout (CUB's own AliasTemporaries) and passes, with the numbers read
// from CUB's own policy hub through detail::RuntimePolicy, so host and device use the same policy.
//
// Paths: CUB sorts n <= SingleTilePolicy's tile with one block, larger inputs with onesweep where the
// policy's ONESWEEP flag is set, and with upsweep/scan/downsweep passes elsewhere. For keys of 4 bytes or
// more that flag is set by every policy from Policy600 on, and CUDA 13 builds nothing older than sm_75,
// so the upsweep/downsweep path is never CUB's choice for kiln's specs; kiln does not carry its kernels,
// and a chain that ever selected it would fail loudly (cudaErrorNotSupported), never sort wrongly.
#include <kiln/prim/radix_sort.hpp>

#include <kiln/prim/detail/cub_launch.cuh>
#include "one_shot.hpp"
#include "stream_temp.cuh"

#include <kiln_prim/radix_sort.cuh>

#include <cub/util_temporary_storage.cuh>
#include <cub/util_type.cuh>

#include <cuda/cmath>
#include <cuda/std/__algorithm_>

#include <cuda_runtime_api.h>

#include <string>

namespace kiln::prim {
namespace {

template <typename K>
using Types = kiln_prim::radix_sort_pairs<detail::kernel_t<K>>;

template <typename K>
std::string spec() { return std::string("radix_sort_pairs_") + detail::type_suffix<K>(); }

struct Kernels {
  detail::KernelRef single_tile, histogram, exclusive_sum, onesweep;
};

// One call of DispatchRadixSort::Invoke (dispatch_radix_sort.cuh:964), for the policy RuntimePolicy picks.
// With d_temp == nullptr it only sizes the temporary storage, as CUB does.
template <typename K>
class SortPass {
  using T = Types<K>;
  using KeyT = typename T::key_t;
  using ValueT = typename T::value_t;
  using OffsetT = typename T::offset_t;
  using PortionOffsetT = typename T::portion_offset_t;
  using AtomicOffsetT = typename T::atomic_offset_t;
  using DecomposerT = typename T::decomposer_t;

 public:
  SortPass(const Kernels& kernels, const detail::LauncherFactory& factory, void* d_temp, std::size_t& temp_bytes,
           cub::DoubleBuffer<KeyT>& keys, cub::DoubleBuffer<ValueT>& values, OffsetT num_items,
           bool is_overwrite_okay, CUstream stream)
      : kernels_(kernels), factory_(factory), d_temp_(d_temp), temp_bytes_(temp_bytes), keys_(keys), values_(values),
        num_items_(num_items), is_overwrite_okay_(is_overwrite_okay), stream_(stream) {}

  template <typename Policy>
  cudaError_t Invoke() {
    using SingleTilePolicy = typename Policy::SingleTilePolicy;
    // Empty problem (:969). begin_bit == end_bit never happens: kiln sorts all key bits.
    if (num_items_ == 0) {
      if (d_temp_ == nullptr) temp_bytes_ = 1;
      return cudaSuccess;
    }
    // (:994)
    if (num_items_ <= OffsetT(SingleTilePolicy::BLOCK_THREADS * SingleTilePolicy::ITEMS_PER_THREAD)) {
      return single_tile<Policy>();
    }
    if constexpr (bool(Policy::ONESWEEP)) {
      return onesweep<Policy>();
    } else {
      return cudaErrorNotSupported;  // CUB's upsweep/downsweep passes: see the top of this file
    }
  }

 private:
  // DispatchRadixSort::InvokeSingleTile (:198).
  template <typename Policy>
  cudaError_t single_tile() {
    if (d_temp_ == nullptr) {
      temp_bytes_ = 1;
      return cudaSuccess;
    }
    const cudaError_t error =
        factory_(1, Policy::SingleTilePolicy::BLOCK_THREADS, 0, stream_)
            .doit(kernels_.single_tile, static_cast<const KeyT*>(keys_.Current()), keys_.Alternate(),
                  static_cast<const ValueT*>(values_.Current()), values_.Alternate(), num_items_, begin_bit_,
                  end_bit_, DecomposerT{});
    if (error != cudaSuccess) return error;
    keys_.selector ^= 1;
    values_.selector ^= 1;
    return cudaSuccess;
  }

  // DispatchRadixSort::InvokeOnesweep (:459).
  template <typename Policy>
  cudaError_t onesweep() {
    constexpr int RADIX_BITS = Policy::ONESWEEP_RADIX_BITS;
    constexpr int RADIX_DIGITS = 1 << RADIX_BITS;
    constexpr int ONESWEEP_ITEMS_PER_THREAD = Policy::OnesweepPolicy::ITEMS_PER_THREAD;
    constexpr int ONESWEEP_BLOCK_THREADS = Policy::OnesweepPolicy::BLOCK_THREADS;
    constexpr int ONESWEEP_TILE_ITEMS = ONESWEEP_ITEMS_PER_THREAD * ONESWEEP_BLOCK_THREADS;
    // Portions keep the lookback's counts within PortionOffsetT (:473).
    constexpr PortionOffsetT PORTION_SIZE = ((1 << 28) - 1) / ONESWEEP_TILE_ITEMS * ONESWEEP_TILE_ITEMS;
    const int num_passes = ::cuda::ceil_div(end_bit_ - begin_bit_, RADIX_BITS);
    const OffsetT num_portions = static_cast<OffsetT>(::cuda::ceil_div(num_items_, PORTION_SIZE));
    const PortionOffsetT max_num_blocks = ::cuda::ceil_div(
        static_cast<int>(_CUDA_VSTD::min(num_items_, static_cast<OffsetT>(PORTION_SIZE))), ONESWEEP_TILE_ITEMS);

    const std::size_t value_size = sizeof(ValueT);  // pairs: never KEYS_ONLY
    const std::size_t allocation_sizes[] = {
        // bins
        num_portions * num_passes * RADIX_DIGITS * sizeof(OffsetT),
        // lookback
        max_num_blocks * RADIX_DIGITS * sizeof(AtomicOffsetT),
        // extra key buffer
        is_overwrite_okay_ || num_passes <= 1 ? 0 : num_items_ * sizeof(KeyT),
        // extra value buffer
        is_overwrite_okay_ || num_passes <= 1 ? 0 : num_items_ * value_size,
        // counters
        num_portions * num_passes * sizeof(AtomicOffsetT),
    };
    constexpr int NUM_ALLOCATIONS = sizeof(allocation_sizes) / sizeof(allocation_sizes[0]);
    void* allocations[NUM_ALLOCATIONS] = {};
    // CUB ignores this result (storage too small leaves the pointers null); kiln's plans check the size
    // before calling, and a failure here is returned rather than launched on.
    cudaError_t error = cub::detail::AliasTemporaries<NUM_ALLOCATIONS>(d_temp_, temp_bytes_, allocations,
                                                                        allocation_sizes);
    if (d_temp_ == nullptr) return cudaSuccess;
    if (error != cudaSuccess) return error;

    OffsetT* d_bins = static_cast<OffsetT*>(allocations[0]);
    AtomicOffsetT* d_lookback = static_cast<AtomicOffsetT*>(allocations[1]);
    KeyT* d_keys_tmp2 = static_cast<KeyT*>(allocations[2]);
    ValueT* d_values_tmp2 = static_cast<ValueT*>(allocations[3]);
    AtomicOffsetT* d_ctrs = static_cast<AtomicOffsetT*>(allocations[4]);

    // Initialisation (:512): the block counters of every (portion, pass), and the first portion's
    // histograms, which the histogram kernel accumulates into.
    error = cudaMemsetAsync(d_ctrs, 0, num_portions * num_passes * sizeof(AtomicOffsetT), stream_);
    if (error != cudaSuccess) return error;
    error = cudaMemsetAsync(d_bins, 0, num_passes * RADIX_DIGITS * sizeof(OffsetT), stream_);
    if (error != cudaSuccess) return error;

    int num_sms = 0;
    error = factory_.MultiProcessorCount(num_sms);
    if (error != cudaSuccess) return error;

    // Histograms of every pass's digit in one read of the keys (:545, :563).
    constexpr int HISTO_BLOCK_THREADS = Policy::HistogramPolicy::BLOCK_THREADS;
    int histo_blocks_per_sm = 1;
    error = factory_.MaxSmOccupancy(histo_blocks_per_sm, kernels_.histogram, HISTO_BLOCK_THREADS, 0);
    if (error != cudaSuccess) return error;
    error = factory_(histo_blocks_per_sm * num_sms, HISTO_BLOCK_THREADS, 0, stream_)
                .doit(kernels_.histogram, d_bins, static_cast<const KeyT*>(keys_.Current()), num_items_, begin_bit_,
                      end_bit_, DecomposerT{});
    if (error != cudaSuccess) return error;

    // Exclusive sums of the histograms: where each digit's run starts, one block per pass (:590).
    constexpr int SCAN_BLOCK_THREADS = Policy::ExclusiveSumPolicy::BLOCK_THREADS;
    error = factory_(num_passes, SCAN_BLOCK_THREADS, 0, stream_).doit(kernels_.exclusive_sum, d_bins);
    if (error != cudaSuccess) return error;

    // Out of place, the first pass writes to the extra buffers when the number of passes is even, so that
    // the last pass lands in the caller's output (:607).
    KeyT* d_keys_tmp = keys_.Alternate();
    ValueT* d_values_tmp = values_.Alternate();
    if (!is_overwrite_okay_ && num_passes % 2 == 0) {
      keys_.d_buffers[1] = d_keys_tmp2;
      values_.d_buffers[1] = d_values_tmp2;
    }

    // One onesweep launch per pass and portion (:613, :654).
    for (int current_bit = begin_bit_, pass = 0; current_bit < end_bit_; current_bit += RADIX_BITS, ++pass) {
      const int num_bits = _CUDA_VSTD::min(end_bit_ - current_bit, RADIX_BITS);
      for (OffsetT portion = 0; portion < num_portions; ++portion) {
        const PortionOffsetT portion_num_items = static_cast<PortionOffsetT>(
            _CUDA_VSTD::min(num_items_ - portion * PORTION_SIZE, OffsetT{PORTION_SIZE}));
        const PortionOffsetT num_blocks = ::cuda::ceil_div(portion_num_items, ONESWEEP_TILE_ITEMS);

        error = cudaMemsetAsync(d_lookback, 0, num_blocks * RADIX_DIGITS * sizeof(AtomicOffsetT), stream_);
        if (error != cudaSuccess) return error;

        error =
            factory_(num_blocks, ONESWEEP_BLOCK_THREADS, 0, stream_)
                .doit(kernels_.onesweep, d_lookback, d_ctrs + portion * num_passes + pass,
                      portion < num_portions - 1 ? d_bins + ((portion + 1) * num_passes + pass) * RADIX_DIGITS
                                                 : static_cast<OffsetT*>(nullptr),
                      static_cast<const OffsetT*>(d_bins + (portion * num_passes + pass) * RADIX_DIGITS),
                      keys_.Alternate(), static_cast<const KeyT*>(keys_.Current() + portion * PORTION_SIZE),
                      values_.Alternate(), static_cast<const ValueT*>(values_.Current() + portion * PORTION_SIZE),
                      portion_num_items, current_bit, num_bits, DecomposerT{});
        if (error != cudaSuccess) return error;
      }

      // After the first pass, out of place, the caller's output and the extra buffers alternate (:687).
      if (!is_overwrite_okay_ && pass == 0) {
        keys_ = num_passes % 2 == 0 ? cub::DoubleBuffer<KeyT>(d_keys_tmp, d_keys_tmp2)
                                    : cub::DoubleBuffer<KeyT>(d_keys_tmp2, d_keys_tmp);
        values_ = num_passes % 2 == 0 ? cub::DoubleBuffer<ValueT>(d_values_tmp, d_values_tmp2)
                                      : cub::DoubleBuffer<ValueT>(d_values_tmp2, d_values_tmp);
      }
      keys_.selector ^= 1;
      values_.selector ^= 1;
    }
    return cudaSuccess;
  }

  const Kernels& kernels_;
  const detail::LauncherFactory& factory_;
  void* d_temp_;
  std::size_t& temp_bytes_;
  cub::DoubleBuffer<KeyT>& keys_;
  cub::DoubleBuffer<ValueT>& values_;
  OffsetT num_items_;
  int begin_bit_ = 0;
  int end_bit_ = int(sizeof(KeyT) * 8);
  bool is_overwrite_okay_;
  CUstream stream_;
};

// One dispatch: sizes the storage when temp.data is null, sorts otherwise; returns the bytes needed.
template <typename K>
std::size_t dispatch(CUdevice device, const Kernel& single_tile, const Kernel& histogram,
                     const Kernel& exclusive_sum, const Kernel& onesweep,
                     cub::DoubleBuffer<typename Types<K>::key_t>& keys,
                     cub::DoubleBuffer<typename Types<K>::value_t>& values, std::size_t n, bool is_overwrite_okay,
                     TempStorage temp, CUstream stream) {
  const auto count = detail::checked_count(n, "radix_sort_pairs");
  detail::LaunchStatus status;
  // The four kernels are one unit: one binary, one architecture.
  detail::LauncherFactory factory(device, onesweep.provenance.arch, &status);
  const Kernels kernels{detail::ref(single_tile), detail::ref(histogram), detail::ref(exclusive_sum),
                        detail::ref(onesweep)};
  std::size_t bytes = temp.bytes;
  SortPass<K> pass(kernels, factory, temp.data, bytes, keys, values, count, is_overwrite_okay, stream);
  int ptx_version = 0;
  factory.PtxVersion(ptx_version);
  const cudaError_t returned =
      detail::RuntimePolicy<typename Types<K>::policy_hub::MaxPolicy>::Invoke(ptx_version, pass);
  detail::check_dispatch(returned, status, spec<K>());
  return bytes;
}

// The sizes DispatchRadixSort decides by, read from the policy the way it reads them.
struct Tiles {
  std::size_t single_tile = 0, onesweep_tile = 0, portion = 0;
  template <typename Policy>
  cudaError_t Invoke() {
    single_tile = std::size_t(Policy::SingleTilePolicy::BLOCK_THREADS) * Policy::SingleTilePolicy::ITEMS_PER_THREAD;
    const int tile = Policy::OnesweepPolicy::BLOCK_THREADS * Policy::OnesweepPolicy::ITEMS_PER_THREAD;
    onesweep_tile = std::size_t(tile);
    portion = std::size_t(((1 << 28) - 1) / tile * tile);
    return cudaSuccess;
  }
};

template <typename K>
Tiles tiles(const Kernel& onesweep) {
  Tiles t;
  detail::RuntimePolicy<typename Types<K>::policy_hub::MaxPolicy>::Invoke(int(onesweep.provenance.arch) * 10, t);
  return t;
}

template <typename K>
using KeyOf = typename Types<K>::key_t;
using ValueOf = int;

template <typename K>
cub::DoubleBuffer<KeyOf<K>> out_of_place(const K* in, K* out) {
  // As cub::DeviceRadixSort::SortPairs: const is cast away, and the input is never written.
  return {reinterpret_cast<KeyOf<K>*>(const_cast<K*>(in)), reinterpret_cast<KeyOf<K>*>(out)};
}

template <typename K>
cub::DoubleBuffer<KeyOf<K>> cub_buffer(const DoubleBuffer<K>& b) {
  cub::DoubleBuffer<KeyOf<K>> c(reinterpret_cast<KeyOf<K>*>(b.buffers[0]), reinterpret_cast<KeyOf<K>*>(b.buffers[1]));
  c.selector = b.selector;
  return c;
}

}  // namespace

template <typename K>
RadixSortPairs<K>::RadixSortPairs(Registry& registry)
    : registry_(&registry),
      device_(detail::device_of(registry)),
      single_tile_(registry.get(spec<K>() + "_single_tile")),
      histogram_(registry.get(spec<K>() + "_histogram")),
      exclusive_sum_(registry.get(spec<K>() + "_exclusive_sum")),
      onesweep_(registry.get(spec<K>() + "_onesweep")) {}

template <typename K>
std::size_t RadixSortPairs<K>::single_tile_items() const { return tiles<K>(onesweep_).single_tile; }
template <typename K>
std::size_t RadixSortPairs<K>::tile_items() const { return tiles<K>(onesweep_).onesweep_tile; }
template <typename K>
std::size_t RadixSortPairs<K>::portion_items() const { return tiles<K>(onesweep_).portion; }

// --- out of place ------------------------------------------------------------------------------------
template <typename K>
std::size_t RadixSortPairs<K>::temp_bytes(std::size_t n) const {
  detail::ContextScope scope(*registry_);
  cub::DoubleBuffer<KeyOf<K>> keys;
  cub::DoubleBuffer<ValueOf> values;
  return dispatch<K>(device_, single_tile_, histogram_, exclusive_sum_, onesweep_, keys, values, n, false, {}, nullptr);
}

template <typename K>
void RadixSortPairs<K>::operator()(const K* keys_in, K* keys_out, const Value* values_in, Value* values_out,
                                   std::size_t n, TempStorage temp, CUstream stream) const {
  detail::check_temp(temp, temp_bytes(n), "radix_sort_pairs");
  detail::ContextScope scope(*registry_);
  auto keys = out_of_place(keys_in, keys_out);
  cub::DoubleBuffer<ValueOf> values(const_cast<Value*>(values_in), values_out);
  dispatch<K>(device_, single_tile_, histogram_, exclusive_sum_, onesweep_, keys, values, n, false, temp, stream);
}

template <typename K>
void RadixSortPairs<K>::operator()(const K* keys_in, K* keys_out, const Value* values_in, Value* values_out,
                                   std::size_t n, CUstream stream) {
  detail::ContextScope scope(*registry_);
  (*this)(keys_in, keys_out, values_in, values_out, n, workspace_.reserve(temp_bytes(n)), stream);
}

// --- double buffer -----------------------------------------------------------------------------------
template <typename K>
std::size_t RadixSortPairs<K>::temp_bytes_double_buffer(std::size_t n) const {
  detail::ContextScope scope(*registry_);
  cub::DoubleBuffer<KeyOf<K>> keys;
  cub::DoubleBuffer<ValueOf> values;
  return dispatch<K>(device_, single_tile_, histogram_, exclusive_sum_, onesweep_, keys, values, n, true, {}, nullptr);
}

template <typename K>
void RadixSortPairs<K>::operator()(DoubleBuffer<K>& keys, DoubleBuffer<Value>& values, std::size_t n,
                                   TempStorage temp, CUstream stream) const {
  detail::check_temp(temp, temp_bytes_double_buffer(n), "radix_sort_pairs");
  detail::ContextScope scope(*registry_);
  auto cub_keys = cub_buffer(keys);
  auto cub_values = cub_buffer(values);
  dispatch<K>(device_, single_tile_, histogram_, exclusive_sum_, onesweep_, cub_keys, cub_values, n, true, temp,
              stream);
  // With overwriting allowed CUB only flips the selectors; the buffers stay the caller's.
  keys.selector = cub_keys.selector;
  values.selector = cub_values.selector;
}

template <typename K>
void RadixSortPairs<K>::operator()(DoubleBuffer<K>& keys, DoubleBuffer<Value>& values, std::size_t n,
                                   CUstream stream) {
  detail::ContextScope scope(*registry_);
  (*this)(keys, values, n, workspace_.reserve(temp_bytes_double_buffer(n)), stream);
}

// --- one-shot ----------------------------------------------------------------------------------------
namespace {
template <typename K>
const RadixSortPairs<K>& shared_plan(int device) {
  static detail::OneShot<RadixSortPairs<K>> plans;
  return plans.plan(device);
}
}  // namespace

template <typename K>
void radix_sort_pairs(const K* keys_in, K* keys_out, const std::int32_t* values_in, std::int32_t* values_out,
                      std::size_t n, CUstream stream) {
  const int device = detail::one_shot_device(stream);
  const RadixSortPairs<K>& plan = shared_plan<K>(device);
  detail::ContextScope scope(registry(device));
  detail::StreamTemp temp(plan.temp_bytes(n), stream);
  plan(keys_in, keys_out, values_in, values_out, n, temp.storage(), stream);
}

template <typename K>
void radix_sort_pairs(DoubleBuffer<K>& keys, DoubleBuffer<std::int32_t>& values, std::size_t n, CUstream stream) {
  const int device = detail::one_shot_device(stream);
  const RadixSortPairs<K>& plan = shared_plan<K>(device);
  detail::ContextScope scope(registry(device));
  detail::StreamTemp temp(plan.temp_bytes_double_buffer(n), stream);
  plan(keys, values, n, temp.storage(), stream);
}

// Per row of kernels/primitives.toml (kiln/prim/plan_types.hpp): the plan and its one-shot functions.
#define KILN_PRIM_INSTANTIATE(K) \
  template class RadixSortPairs<K>; \
  template void radix_sort_pairs(const K*, K*, const std::int32_t*, std::int32_t*, std::size_t, CUstream); \
  template void radix_sort_pairs(DoubleBuffer<K>&, DoubleBuffer<std::int32_t>&, std::size_t, CUstream);
KILN_PRIM_RADIX_SORT_PAIRS_TYPES(KILN_PRIM_INSTANTIATE)
#undef KILN_PRIM_INSTANTIATE

}  // namespace kiln::prim
