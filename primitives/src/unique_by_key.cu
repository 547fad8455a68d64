// UniqueByKey<K>: CUB's DispatchUniqueByKey on the registry's unique_by_key_<K> kernels.
#include <kiln/prim/unique_by_key.hpp>

#include <kiln/prim/unique_by_key_plan.cuh>

#include "stream_temp.cuh"

#include <string>

namespace kiln::prim {
namespace {

template <typename K>
using Types = kiln_prim::unique_by_key<detail::kernel_t<K>, int>;

template <typename K>
std::string spec() { return std::string("unique_by_key_") + detail::type_suffix<K>(); }

struct Args {
  const void* keys_in;
  const void* values_in;
  void* keys_out;
  void* values_out;
  std::uint64_t* num_selected;
};

// One CUB dispatch (detail::unique_dispatch, as Unique<K, int, equal_to> runs it).
template <typename K>
std::size_t dispatch(CUdevice device, const Kernel& init, const Kernel& sweep, Args a, std::size_t n,
                     TempStorage temp, CUstream stream) {
  using T = Types<K>;
  return detail::unique_dispatch<T>(device, init, sweep, static_cast<typename T::key_input_t>(a.keys_in),
                                    static_cast<typename T::value_input_t>(a.values_in),
                                    static_cast<typename T::key_output_t>(a.keys_out),
                                    static_cast<typename T::value_output_t>(a.values_out),
                                    reinterpret_cast<typename T::num_selected_t>(a.num_selected), n,
                                    typename T::equality_t{}, temp, stream, spec<K>());
}

}  // namespace

template <typename K>
UniqueByKey<K>::UniqueByKey(Registry& registry)
    : registry_(&registry),
      device_(detail::device_of(registry)),
      init_(registry.get(spec<K>() + "_init")),
      sweep_(registry.get(spec<K>() + "_sweep")) {}

template <typename K>
std::size_t UniqueByKey<K>::tile_items() const {
  return detail::unique_tile_items<Types<K>>(sweep_);
}

template <typename K>
std::size_t UniqueByKey<K>::temp_bytes(std::size_t n) const {
  detail::ContextScope scope(*registry_);
  return dispatch<K>(device_, init_, sweep_, {}, n, {}, nullptr);
}

template <typename K>
void UniqueByKey<K>::operator()(const K* keys_in, const value_type* values_in, K* keys_out, value_type* values_out,
                                std::uint64_t* num_selected, std::size_t n, TempStorage temp, CUstream stream) const {
  detail::ContextScope scope(*registry_);
  const Args args{keys_in, values_in, keys_out, values_out, num_selected};
  detail::check_temp(temp, dispatch<K>(device_, init_, sweep_, args, n, {}, stream), "unique_by_key");
  dispatch<K>(device_, init_, sweep_, args, n, temp, stream);
}

template <typename K>
void UniqueByKey<K>::operator()(const K* keys_in, const value_type* values_in, K* keys_out, value_type* values_out,
                                std::uint64_t* num_selected, std::size_t n, CUstream stream) {
  detail::ContextScope scope(*registry_);
  const Args args{keys_in, values_in, keys_out, values_out, num_selected};
  const std::size_t bytes = dispatch<K>(device_, init_, sweep_, args, n, {}, stream);
  dispatch<K>(device_, init_, sweep_, args, n, workspace_.reserve(bytes), stream);
}

template <typename K>
void unique_by_key(const K* keys_in, const std::int32_t* values_in, K* keys_out, std::int32_t* values_out,
                   std::uint64_t* num_selected, std::size_t n, CUstream stream) {
  static const UniqueByKey<K> plan;
  detail::ContextScope scope(registry());
  const std::size_t bytes = plan.temp_bytes(n);
  detail::StreamTemp temp(bytes, stream);
  plan(keys_in, values_in, keys_out, values_out, num_selected, n, temp.storage(), stream);
}

template class UniqueByKey<std::int32_t>;
template class UniqueByKey<std::uint64_t>;
template void unique_by_key(const std::int32_t*, const std::int32_t*, std::int32_t*, std::int32_t*, std::uint64_t*,
                            std::size_t, CUstream);
template void unique_by_key(const std::uint64_t*, const std::int32_t*, std::uint64_t*, std::int32_t*,
                            std::uint64_t*, std::size_t, CUstream);

}  // namespace kiln::prim
