// The runtime's one value-or-reason type: what a step returns when failing is an expected outcome.
//
// kiln's error model (docs/DESIGN.md, "Errors (one model)"): the public API throws kiln::Error (a code and
// a message that names the kernel, unit, file or option). Inside, a step whose failure is data rather than an
// exceptional event — a decoder refusing bytes, a tier that misses, a compile that fails, a directory
// that is not private — returns Result<T>: the value, or one line saying what was wrong. Such reasons
// travel (across the worker protocol, into the notes of a no_binary error, into warnings), so they are
// values, and they never unwind through a worker's loop or a registry's lock. Code that cannot go on
// turns a Result into a kiln::Error at the point where it knows which code applies.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace kiln::detail {

// Why a step failed: converts into a failed Result<T> of any T.
struct Failed {
  std::string why;
};
inline Failed fail(std::string why) { return Failed{std::move(why)}; }

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit, as `return value;`
  Result(Failed failure) : state_(std::in_place_index<1>, std::move(failure.why)) {}  // NOLINT: `return fail(...)`

  bool ok() const noexcept { return state_.index() == 0; }
  explicit operator bool() const noexcept { return ok(); }

  // The value; only when ok().
  T& value() & { return std::get<0>(state_); }
  const T& value() const& { return std::get<0>(state_); }
  T&& value() && { return std::get<0>(std::move(state_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  // What was wrong; empty when ok().
  const std::string& error() const noexcept {
    static const std::string none;
    return ok() ? none : std::get<1>(state_);
  }

 private:
  std::variant<T, std::string> state_;
};

// A step with nothing to return but success: Status{} is success, fail("...") is not.
struct Ok {};
using Status = Result<Ok>;
inline Status ok() { return Ok{}; }

}  // namespace kiln::detail
