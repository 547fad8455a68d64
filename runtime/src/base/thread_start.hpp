// Starting a thread: the one way the runtime does, so that a process at its thread limit is an outcome
// its caller decides on (do the work itself, fail one request), never an exception that escapes.
#pragma once

#include "base/result.hpp"

#include <atomic>
#include <string>
#include <system_error>
#include <thread>
#include <utility>

namespace kiln::detail {

// Throws std::system_error (resource_unavailable_try_again), as std::thread's constructor does when the
// system has no thread to give, where tests asked this start to fail (fail_thread_starts).
void refuse_thread_start_if_asked();

// A thread running `body`, or why none could be started.
template <typename F>
Result<std::thread> start_thread(F&& body) {
  try {
    refuse_thread_start_if_asked();
    return std::thread(std::forward<F>(body));
  } catch (const std::system_error& e) {
    return fail(std::string("no thread could be started (") + e.what() + ")");
  }
}

// For tests: of the next starts, the first `after` succeed and the `count` after them fail as a process at
// its thread limit would (0, 0: none fails). Process-wide.
void fail_thread_starts(unsigned count, unsigned after = 0) noexcept;

}  // namespace kiln::detail
