// How a kiln-jitd message is described once: a list of its fields (a name and a member), which both the
// encoder and the decoder walk (jit/protocol.cpp), and a count of a struct's members, so that a list that
// leaves a member out does not compile.
#pragma once

#include <cstddef>
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>

namespace kiln::detail {

// One field of a message, in the order it travels. `name` is what a decoding error calls it
// ("request: truncated in pch path").
template <typename Struct, typename Member>
struct Field {
  const char* name;
  Member Struct::*member;
  std::uint64_t limit = 0;  // an enum's: one past its largest value (any other is refused); else unused
};

template <typename Struct, typename Member>
  requires(!std::is_enum_v<Member>)
constexpr Field<Struct, Member> field(const char* name, Member Struct::*member) {
  return {name, member};
}
// An enum's field names its largest value, so that a decoder refuses the bytes no encoder writes.
template <typename Struct, typename Enum>
  requires std::is_enum_v<Enum>
constexpr Field<Struct, Enum> field(const char* name, Enum Struct::*member, Enum last) {
  return {name, member, static_cast<std::uint64_t>(last) + 1};
}

// A member that stays on its side of the pipe: listed, so that the list still covers every member.
template <typename Struct, typename Member>
struct NotSent {
  Member Struct::*member;
};
template <typename Struct, typename Member>
constexpr NotSent<Struct, Member> not_sent(Member Struct::*member) {
  return {member};
}

// Each message's (and each element's) list: a specialisation with `static constexpr auto list = std::tuple{...}`.
template <typename T>
struct Fields;

template <typename T>
concept Described = requires { Fields<T>::list; };

namespace member_count_detail {
// Converts to any member's type; only ever named in unevaluated braced initialisers.
struct Any {
  template <typename T>
  operator T() const;  // NOLINT: implicit by design
};
template <typename T, std::size_t... I>
constexpr bool takes(std::index_sequence<I...>) {
  return requires { T{(void(I), Any{})...}; };
}
}  // namespace member_count_detail

// How many members the aggregate T has: the most initialisers T{...} takes (C++20 has no reflection).
template <typename T, std::size_t N = 0>
constexpr std::size_t member_count() {
  static_assert(std::is_aggregate_v<T>, "only an aggregate's members can be counted");
  if constexpr (member_count_detail::takes<T>(std::make_index_sequence<N + 1>()))
    return member_count<T, N + 1>();
  else
    return N;
}

template <typename A, typename B>
constexpr bool same_member(const A& a, const B& b) {
  if constexpr (std::is_same_v<decltype(a.member), decltype(b.member)>)
    return a.member == b.member;
  else
    return false;
}

// Whether T's list names each of its members (sent or not) once: as many entries as members, none twice.
template <Described T>
constexpr bool lists_every_member() {
  return std::apply(
      [](const auto&... entries) {
        std::size_t matches = 0;  // each entry matches itself; one that matches another names a member twice
        (
            [&](const auto& entry) {
              ((matches += same_member(entry, entries) ? 1 : 0), ...);
            }(entries),
            ...);
        return sizeof...(entries) == member_count<T>() && matches == sizeof...(entries);
      },
      Fields<T>::list);
}

}  // namespace kiln::detail
