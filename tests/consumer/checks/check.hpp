// The consumer's CHECK: prints a failed condition with its place and counts it; main returns the count.
#pragma once

#include <cstdio>

namespace consumer {
inline int failures = 0;
}

#define CHECK(condition)                                                                  \
  ((condition) ? (void)0                                                                  \
               : (void)(std::fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, \
                                     #condition),                                         \
                        ++consumer::failures))
