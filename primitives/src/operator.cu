// The plans of kiln/prim/operator.hpp (ReduceWith, TransformWith, TransformReduceWith, the scans, SegmentedReduceWith,
// MergeSortPairsWith, SelectIfWith, UniqueByKeyWith): CUB's dispatch on kiln's linked rows, with the
// caller's operators linked in (Registry::get with a LinkedSource).
#include <kiln/prim/operator.hpp>

#include <kiln/error.hpp>
#include <kiln/prim/merge_sort_plan.cuh>
#include <kiln/prim/reduce_plan.cuh>
#include <kiln/prim/scan_plan.cuh>
#include <kiln/prim/segmented_reduce_plan.cuh>
#include <kiln/prim/select_plan.cuh>
#include <kiln/prim/transform_plan.cuh>
#include <kiln/prim/unique_by_key_plan.cuh>

#include <kiln_prim/linked_op.cuh>

#include <bit>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace kiln::prim {
namespace detail {

// Bytes16's items are kiln_prim::bytes16 in the kernels: one layout (16 bytes, 16-aligned).
template <> struct kernel_type<Bytes16> { using type = kiln_prim::bytes16; };
static_assert(sizeof(Bytes16) == sizeof(kiln_prim::bytes16) && alignof(Bytes16) == alignof(kiln_prim::bytes16));

namespace {

template <typename T>
using LinkedOp = kiln_prim::linked_binary_op<kernel_t<T>>;

// The suffix of T's linked rows: linked_reduce_f32, linked_reduce_b16, …
template <typename T>
constexpr const char* linked_suffix() {
  if constexpr (std::is_same_v<T, Bytes16>) return "b16";
  else return type_suffix<T>();
}

template <typename T>
std::string plan_name(const char* plan) {
  return std::string(plan) + "<" + operator_type_spelling<T>() + ">";
}

bool is_identifier(std::string_view name) {
  if (name.empty() || (name[0] >= '0' && name[0] <= '9')) return false;
  for (const char c : name) {
    if (!(c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))) return false;
  }
  return true;
}

// NVRTC's log names the operator's actual type in the instantiation of check_operator_signature
// (kiln_prim/linked_op.cuh): "[with Expected=float (float, float), Given=int (int, int)]"; bool is
// "__nv_bool" there, and is put back as the caller wrote it.
std::string given_signature(std::string_view log) {
  const std::size_t at = log.find("Given=");
  if (at == std::string_view::npos) return {};
  const std::size_t end = log.find_first_of("]\n", at);
  std::string given(log.substr(at + 6, end == std::string_view::npos ? std::string_view::npos : end - at - 6));
  for (std::size_t p; (p = given.find("__nv_bool")) != std::string::npos;) given.replace(p, 9, "bool");
  return given;
}

// "R(A, B)" for a result and arguments in C++ spelling.
std::string signature_text(const std::string& result, const std::vector<std::string>& args) {
  std::string text = result + "(";
  for (std::size_t i = 0; i < args.size(); ++i) text += (i ? ", " : "") + args[i];
  return text + ")";
}

// T(T, T): the reduce and scan plans' call of `op`.
template <typename T>
LinkedCall binary(const Operator& op) {
  return {op, operator_type_spelling<T>(), {operator_type_spelling<T>(), operator_type_spelling<T>()}};
}

// bool(K, K): a comparator's or an equality's call.
template <typename K>
LinkedCall predicate2(const Operator& op) {
  return {op, "bool", {operator_type_spelling<K>(), operator_type_spelling<K>()}};
}

// Builds `Plan` over the linked row for T with `calls` linked in; a signature mismatch becomes an error
// naming the operator and both signatures (the instantiation in NVRTC's log is at the line of that
// operator's definition, whose #line file names it).
template <typename Plan, typename T>
std::unique_ptr<Plan> make_linked(const std::vector<LinkedCall>& calls, Registry& registry, const std::string& family,
                                  const char* plan) {
  const std::string name = plan_name<T>(plan);
  const bool given_ir = calls.size() == 1 && !calls.front().op.lto_ir.empty();
  for (const LinkedCall& c : calls) {
    if (!c.op.lto_ir.empty() && !given_ir) {
      throw Error(Errc::invalid_argument, "kiln::prim::" + name + ": operators given as LTO-IR link one at a time; give "
                                          "these as text");
    }
  }
  const LinkedSource link = given_ir ? LinkedSource{"LTO-IR operator '" + calls.front().op.name + "' of kiln::prim::" +
                                                        name, calls.front().op.lto_ir, true}
                                     : linked_operators_source(calls, name);
  const std::string unit = "linked_" + family + "_" + linked_suffix<T>();
  try {
    return std::make_unique<Plan>(registry, unit, &link);
  } catch (const Error& e) {
    const std::string given = e.code() == Errc::compile ? given_signature(e.what()) : std::string();
    if (given.empty()) throw;
    const std::string_view log = e.what();
    const LinkedCall* wrong = &calls.front();
    for (const LinkedCall& c : calls) {
      if (log.find("of kiln: the definition of operator '" + c.op.name + "'") != std::string_view::npos) wrong = &c;
    }
    const std::string t = operator_type_spelling<T>();
    throw Error(Errc::compile, "kiln::prim::" + name + ": operator '" + wrong->op.name + "' is " + given + "; the " +
                                   plan + " calls it as " + signature_text(wrong->result, wrong->args) + " (const " +
                                   t + "& parameters are fine)\n" + e.what());
  }
}

template <typename Plan, typename T>
std::unique_ptr<Plan> make_linked(const LinkedCall& call, Registry& registry, const std::string& family,
                                  const char* plan) {
  return make_linked<Plan, T>(std::vector<LinkedCall>{call}, registry, family, plan);
}

}  // namespace

template <typename T>
struct LinkedReduce {
  LinkedReduce(Registry& registry, const std::string& unit, const LinkedSource* link) : plan(registry, unit, link) {}
  Reduce<kernel_t<T>, LinkedOp<T>> plan;
};
template <typename T>
struct LinkedExclusiveScan {
  LinkedExclusiveScan(Registry& registry, const std::string& unit, const LinkedSource* link)
      : plan(registry, unit, link) {}
  ExclusiveScan<kernel_t<T>, LinkedOp<T>> plan;
};
template <typename T>
struct LinkedInclusiveScan {
  LinkedInclusiveScan(Registry& registry, const std::string& unit, const LinkedSource* link)
      : plan(registry, unit, link) {}
  InclusiveScan<kernel_t<T>, LinkedOp<T>> plan;
};
template <typename T>
struct LinkedSelectIf {
  LinkedSelectIf(Registry& registry, const std::string& unit, const LinkedSource* link) : plan(registry, unit, link) {}
  SelectIf<kernel_t<T>, kiln_prim::linked_unary_op<bool, kernel_t<T>>> plan;
};
template <typename T>
struct LinkedTransform {
  LinkedTransform(Registry& registry, const std::string& unit, const LinkedSource* link) : plan(registry, unit, link) {}
  Transform<kernel_t<T>, kernel_t<T>, kiln_prim::linked_unary_op<kernel_t<T>, kernel_t<T>>> plan;
};
template <typename T>
using LinkedTransformIterator = kiln_prim::transform_iterator<kernel_t<T>, kiln_prim::linked_unary_op<kernel_t<T>, kernel_t<T>>,
                                                      const kernel_t<T>*>;
template <typename T>
struct LinkedTransformReduce {
  LinkedTransformReduce(Registry& registry, const std::string& unit, const LinkedSource* link)
      : plan(registry, unit, link) {}
  Reduce<kernel_t<T>, LinkedOp<T>, LinkedTransformIterator<T>> plan;
};
template <typename T>
struct LinkedSegmentedReduce {
  LinkedSegmentedReduce(Registry& registry, const std::string& unit, const LinkedSource* link)
      : plan(registry, unit, link) {}
  SegmentedReduction<kernel_t<T>, LinkedOp<T>> plan;
};
template <typename K>
struct LinkedUnique {
  LinkedUnique(Registry& registry, const std::string& unit, const LinkedSource* link) : plan(registry, unit, link) {}
  Unique<kernel_t<K>, int, kiln_prim::linked_compare_op<kernel_t<K>>> plan;
};
template <typename K>
struct LinkedMergeSort {
  LinkedMergeSort(Registry& registry, const std::string& unit, const LinkedSource* link) : plan(registry, unit, link) {}
  MergeSort<kernel_t<K>, int, kiln_prim::linked_compare_op<kernel_t<K>>> plan;
};

}  // namespace detail

LinkedSource linked_operators_source(const std::vector<LinkedCall>& calls, const std::string& plan) {
  if (calls.empty()) throw kiln::Error(kiln::Errc::invalid_argument, "kiln::prim::" + plan + ": no operator to link");
  LinkedSource link;
  link.source = "#include <kiln_prim/linked_op.cuh>\n";
  for (std::size_t k = 0; k < calls.size(); ++k) {
    const LinkedCall& c = calls[k];
    if (!detail::is_identifier(c.op.name)) {
      throw kiln::Error(kiln::Errc::invalid_argument, "kiln::prim::" + plan + ": the operator's name '" + c.op.name +
                                  "' is not a C++ identifier (Operator::name names the function its source defines)");
    }
    for (std::size_t j = 0; j < k; ++j) {
      if (calls[j].op.name == c.op.name) {
        throw kiln::Error(kiln::Errc::invalid_argument, "kiln::prim::" + plan + ": two operators are named '" + c.op.name +
                                    "'; they share one translation unit, so their names must differ");
      }
    }
    std::string template_args = c.result, parameters, call;
    for (std::size_t i = 0; i < c.args.size(); ++i) {
      const std::string p = std::string("a").append(std::to_string(i));
      template_args += ", " + c.args[i];
      parameters += (i ? ", " : "") + c.args[i] + " " + p;
      call += (i ? ", " : "") + p;
    }
    link.name += (k ? " and operator '" : "operator '") + c.op.name + "'";
    link.source += "#line 1 \"operator " + c.op.name + "\"\n" + c.op.source + "\n" +
                   "#line 1 \"kiln: the definition of operator '" + c.op.name + "' linked into " + plan + "\"\n" +
                   "static_assert(kiln_prim::detail::check_operator_signature<" +
                   detail::signature_text(c.result, c.args) + ", kiln_prim::detail::signature_of<decltype(&" +
                   c.op.name + ")>::type>::ok, \"\");\n" + "template <> __device__ " + c.result +
                   " kiln_prim::linked_operator<" + template_args + ">(" + parameters + ") { return " + c.op.name +
                   "(" + call + "); }\n";
  }
  link.name += " of kiln::prim::" + plan;
  return link;
}

LinkedSource linked_operator_source(const Operator& op, const std::string& result, const std::vector<std::string>& args,
                                    const std::string& plan) {
  return linked_operators_source({LinkedCall{op, result, args}}, plan);
}

LinkedSource linked_operator_source(const Operator& op, const std::string& type, const std::string& plan) {
  return linked_operator_source(op, type, {type, type}, plan);
}

// The 64-bit integer types are `long` here and `long long` in the kernels, Bytes16 is kiln_prim::bytes16: one
// representation each.
template <typename T>
static const detail::kernel_t<T>* in_ptr(const T* p) { return reinterpret_cast<const detail::kernel_t<T>*>(p); }
template <typename T>
static detail::kernel_t<T>* out_ptr(T* p) { return reinterpret_cast<detail::kernel_t<T>*>(p); }
template <typename T>
static detail::kernel_t<T> in_value(const T& v) { return std::bit_cast<detail::kernel_t<T>>(v); }

template <typename T>
ReduceWith<T>::ReduceWith(const Operator& op, Registry& registry)
    : detail::LinkedPlan<detail::LinkedReduce<T>>(detail::make_linked<detail::LinkedReduce<T>, T>(detail::binary<T>(op), registry, "reduce", "ReduceWith")) {}
template <typename T>
void ReduceWith<T>::operator()(const T* in, T* out, std::size_t n, T init, TempStorage temp, CUstream stream) const {
  std::as_const(this->plan_->plan)(in_ptr(in), out_ptr(out), n, in_value(init), temp, stream);
}
template <typename T>
void ReduceWith<T>::operator()(const T* in, T* out, std::size_t n, T init, CUstream stream) {
  this->plan_->plan(in_ptr(in), out_ptr(out), n, in_value(init), stream);
}

template <typename T>
ExclusiveScanWith<T>::ExclusiveScanWith(const Operator& op, Registry& registry)
    : detail::LinkedPlan<detail::LinkedExclusiveScan<T>>(detail::make_linked<detail::LinkedExclusiveScan<T>, T>(detail::binary<T>(op), registry, "exclusive_scan",
                                                                   "ExclusiveScanWith")) {}
template <typename T>
void ExclusiveScanWith<T>::operator()(const T* in, T* out, std::size_t n, T init, TempStorage temp,
                                      CUstream stream) const {
  std::as_const(this->plan_->plan)(in_ptr(in), out_ptr(out), n, in_value(init), temp, stream);
}
template <typename T>
void ExclusiveScanWith<T>::operator()(const T* in, T* out, std::size_t n, T init, CUstream stream) {
  this->plan_->plan(in_ptr(in), out_ptr(out), n, in_value(init), stream);
}

template <typename T>
InclusiveScanWith<T>::InclusiveScanWith(const Operator& op, Registry& registry)
    : detail::LinkedPlan<detail::LinkedInclusiveScan<T>>(detail::make_linked<detail::LinkedInclusiveScan<T>, T>(detail::binary<T>(op), registry, "inclusive_scan",
                                                                   "InclusiveScanWith")) {}
template <typename T>
void InclusiveScanWith<T>::operator()(const T* in, T* out, std::size_t n, TempStorage temp, CUstream stream) const {
  std::as_const(this->plan_->plan)(in_ptr(in), out_ptr(out), n, temp, stream);
}
template <typename T>
void InclusiveScanWith<T>::operator()(const T* in, T* out, std::size_t n, CUstream stream) {
  this->plan_->plan(in_ptr(in), out_ptr(out), n, stream);
}

template <typename K>
MergeSortPairsWith<K>::MergeSortPairsWith(const Operator& compare, Registry& registry)
    : detail::LinkedPlan<detail::LinkedMergeSort<K>>(detail::make_linked<detail::LinkedMergeSort<K>, K>(detail::predicate2<K>(compare), registry,
                                                               "merge_sort_pairs", "MergeSortPairsWith")) {}
template <typename K>
void MergeSortPairsWith<K>::operator()(K* keys, value_type* values, std::size_t n, TempStorage temp,
                                       CUstream stream) const {
  std::as_const(this->plan_->plan)(out_ptr(keys), values, n, temp, stream);
}
template <typename K>
void MergeSortPairsWith<K>::operator()(K* keys, value_type* values, std::size_t n, CUstream stream) {
  this->plan_->plan(out_ptr(keys), values, n, stream);
}

template <typename T>
SelectIfWith<T>::SelectIfWith(const Operator& pred, Registry& registry)
    : detail::LinkedPlan<detail::LinkedSelectIf<T>>(detail::make_linked<detail::LinkedSelectIf<T>, T>(LinkedCall{pred, "bool", {operator_type_spelling<T>()}},
                                                              registry, "select_if", "SelectIfWith")) {}
template <typename T>
void SelectIfWith<T>::operator()(const T* in, T* out, std::int64_t* count, std::size_t n, TempStorage temp,
                                 CUstream stream) const {
  std::as_const(this->plan_->plan)(in_ptr(in), out_ptr(out), out_ptr(count), n, temp, stream);
}
template <typename T>
void SelectIfWith<T>::operator()(const T* in, T* out, std::int64_t* count, std::size_t n, CUstream stream) {
  this->plan_->plan(in_ptr(in), out_ptr(out), out_ptr(count), n, stream);
}

template <typename T>
TransformWith<T>::TransformWith(const Operator& op, Registry& registry)
    : detail::LinkedPlan<detail::LinkedTransform<T>>(detail::make_linked<detail::LinkedTransform<T>, T>(
          LinkedCall{op, operator_type_spelling<T>(), {operator_type_spelling<T>()}}, registry, "transform",
          "TransformWith")) {}
template <typename T>
void TransformWith<T>::operator()(const T* in, T* out, std::size_t n, CUstream stream) const {
  this->plan_->plan(in_ptr(in), out_ptr(out), n, stream);
}

template <typename T>
TransformReduceWith<T>::TransformReduceWith(const Operator& transform, const Operator& reduce, Registry& registry)
    : detail::LinkedPlan<detail::LinkedTransformReduce<T>>(detail::make_linked<detail::LinkedTransformReduce<T>, T>(
          {LinkedCall{transform, operator_type_spelling<T>(), {operator_type_spelling<T>()}}, detail::binary<T>(reduce)},
          registry, "transform_reduce", "TransformReduceWith")) {}
template <typename T>
void TransformReduceWith<T>::operator()(const T* in, T* out, std::size_t n, T init, TempStorage temp,
                                        CUstream stream) const {
  std::as_const(this->plan_->plan)(detail::LinkedTransformIterator<T>{in_ptr(in), {}}, out_ptr(out), n, in_value(init), temp, stream);
}
template <typename T>
void TransformReduceWith<T>::operator()(const T* in, T* out, std::size_t n, T init, CUstream stream) {
  this->plan_->plan(detail::LinkedTransformIterator<T>{in_ptr(in), {}}, out_ptr(out), n, in_value(init), stream);
}

template <typename T>
SegmentedReduceWith<T>::SegmentedReduceWith(const Operator& op, Registry& registry)
    : detail::LinkedPlan<detail::LinkedSegmentedReduce<T>>(detail::make_linked<detail::LinkedSegmentedReduce<T>, T>(detail::binary<T>(op), registry,
                                                                     "segmented_reduce", "SegmentedReduceWith")) {}
template <typename T>
void SegmentedReduceWith<T>::operator()(const T* in, T* out, std::size_t num_segments, const std::int32_t* offsets,
                                        T init, TempStorage temp, CUstream stream) const {
  std::as_const(this->plan_->plan)(in_ptr(in), out_ptr(out), num_segments, offsets, in_value(init), temp, stream);
}
template <typename T>
void SegmentedReduceWith<T>::operator()(const T* in, T* out, std::size_t num_segments, const std::int32_t* offsets,
                                        T init, CUstream stream) {
  this->plan_->plan(in_ptr(in), out_ptr(out), num_segments, offsets, in_value(init), stream);
}

template <typename K>
UniqueByKeyWith<K>::UniqueByKeyWith(const Operator& equal, Registry& registry)
    : detail::LinkedPlan<detail::LinkedUnique<K>>(detail::make_linked<detail::LinkedUnique<K>, K>(detail::predicate2<K>(equal), registry, "unique_by_key",
                                                            "UniqueByKeyWith")) {}
template <typename K>
void UniqueByKeyWith<K>::operator()(const K* keys_in, const value_type* values_in, K* keys_out, value_type* values_out,
                                    std::uint64_t* num_selected, std::size_t n, TempStorage temp,
                                    CUstream stream) const {
  std::as_const(this->plan_->plan)(in_ptr(keys_in), values_in, out_ptr(keys_out), values_out, out_ptr(num_selected), n,
                             temp, stream);
}
template <typename K>
void UniqueByKeyWith<K>::operator()(const K* keys_in, const value_type* values_in, K* keys_out, value_type* values_out,
                                    std::uint64_t* num_selected, std::size_t n, CUstream stream) {
  this->plan_->plan(in_ptr(keys_in), values_in, out_ptr(keys_out), values_out, out_ptr(num_selected), n, stream);
}

template <typename Impl>
detail::LinkedPlan<Impl>::LinkedPlan(std::unique_ptr<Impl> plan) : plan_(std::move(plan)) {}
template <typename Impl>
detail::LinkedPlan<Impl>::~LinkedPlan() = default;
template <typename Impl>
detail::LinkedPlan<Impl>::LinkedPlan(LinkedPlan&&) noexcept = default;
template <typename Impl>
std::size_t detail::LinkedPlan<Impl>::temp_bytes(std::size_t n) const { return plan_->plan.temp_bytes(n); }
template <typename Impl>
std::size_t detail::LinkedPlan<Impl>::tile_items() const { return plan_->plan.tile_items(); }
template <typename Impl>
const Kernel& detail::LinkedPlan<Impl>::kernel() const { return plan_->plan.kernel(); }

#define KILN_LINKED_PLANS(T)             \
  template class detail::LinkedPlan<detail::LinkedReduce<T>>; \
  template class detail::LinkedPlan<detail::LinkedExclusiveScan<T>>; \
  template class detail::LinkedPlan<detail::LinkedInclusiveScan<T>>; \
  template class detail::LinkedPlan<detail::LinkedTransformReduce<T>>; \
  template class detail::LinkedPlan<detail::LinkedSegmentedReduce<T>>; \
  template class detail::LinkedPlan<detail::LinkedMergeSort<T>>; \
  template class detail::LinkedPlan<detail::LinkedSelectIf<T>>; \
  template class detail::LinkedPlan<detail::LinkedUnique<T>>; \
  template class detail::LinkedPlan<detail::LinkedTransform<T>>; \
  template class TransformWith<T>;       \
  template class ReduceWith<T>;          \
  template class ExclusiveScanWith<T>;   \
  template class InclusiveScanWith<T>;   \
  template class SegmentedReduceWith<T>; \
  template class TransformReduceWith<T>; \
  template class MergeSortPairsWith<T>;  \
  template class SelectIfWith<T>;        \
  template class UniqueByKeyWith<T>;
KILN_LINKED_PLANS(std::int32_t)
KILN_LINKED_PLANS(std::uint32_t)
KILN_LINKED_PLANS(std::int64_t)
KILN_LINKED_PLANS(std::uint64_t)
KILN_LINKED_PLANS(float)
KILN_LINKED_PLANS(double)
KILN_LINKED_PLANS(Bytes16)
#undef KILN_LINKED_PLANS

}  // namespace kiln::prim
