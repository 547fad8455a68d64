// Runs a check in a child whose address space may grow only a little, so that a decoder allocating what
// untrusted bytes claim fails there (std::bad_alloc) instead of costing the machine gigabytes.
#pragma once

#include "cache_test_util.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <functional>

namespace kiln::test {

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kAddressSpaceLimitWorks = false;  // ASan reserves terabytes of shadow memory up front
#elif defined(__has_feature)
#  if __has_feature(address_sanitizer)
inline constexpr bool kAddressSpaceLimitWorks = false;
#  else
inline constexpr bool kAddressSpaceLimitWorks = true;
#  endif
#else
inline constexpr bool kAddressSpaceLimitWorks = true;
#endif

// This process's address space now, in bytes (/proc/self/statm's first field).
inline std::size_t address_space_bytes() {
  unsigned long pages = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%lu", &pages) != 1) pages = 0;
    std::fclose(f);
  }
  return pages * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
}

// `body` in a forked child (its checks, its exit code) whose address space may grow by `headroom` bytes
// at most (RLIMIT_AS; not under AddressSanitizer, where the child runs without the limit).
inline int run_with_memory_headroom(std::size_t headroom, const std::function<int()>& body) {
  return run_in_child([&] {
    if (kAddressSpaceLimitWorks) {
      const rlim_t limit = address_space_bytes() + headroom;
      const rlimit rl{limit, limit};
      if (::setrlimit(RLIMIT_AS, &rl) != 0) return 2;
    }
    return body();
  });
}

}  // namespace kiln::test
