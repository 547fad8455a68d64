// Starting a thread, and the failures tests ask for (base/thread_start.hpp).
#include "base/thread_start.hpp"

#include <atomic>
#include <cerrno>

namespace kiln::detail {
namespace {
std::atomic<unsigned> g_succeed{0};
std::atomic<unsigned> g_refuse{0};
}  // namespace

void refuse_thread_start_if_asked() {
  if (g_refuse.load(std::memory_order_relaxed) == 0) return;
  for (unsigned left = g_succeed.load(); left > 0;)
    if (g_succeed.compare_exchange_weak(left, left - 1)) return;
  for (unsigned left = g_refuse.load(); left > 0;) {
    if (g_refuse.compare_exchange_weak(left, left - 1))
      throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again),
                              "thread start refused for a test");
  }
}

void fail_thread_starts(unsigned count, unsigned after) noexcept {
  g_refuse.store(0);
  g_succeed.store(after);
  g_refuse.store(count);
}

}  // namespace kiln::detail
