// What the JIT pool's settings (KILN_JIT_*, KILN_JITD: base/settings.hpp) mean, and the environment its
// workers run with.
#pragma once

#include "base/result.hpp"

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::detail {

// KILN_JIT_WORKERS's meaning: a whole number from 1 to kMaxJitWorkers; unset or empty gives the
// default. Anything else fails with the warning to print, and the pool takes the default.
inline constexpr unsigned kMaxJitWorkers = 256;
unsigned default_jit_workers();  // the cores, at most 16
Result<unsigned> jit_workers_from(const char* value);

// KILN_JIT_TIMEOUT's meaning: how long one compile may take on a worker, in whole seconds from 1 to
// 86400; unset or empty gives kDefaultJitTimeout. Anything else fails with the warning to print.
Result<std::chrono::milliseconds> jit_timeout_from(const char* value);

// KILN_JIT_PCH's meaning: "0" turns precompiled headers kept across processes off (and so the
// workers' ASLR stays on); unset, empty or "1" leaves them on. Anything else fails with the warning.
Result<bool> jit_pch_from(const char* value);

// Whether the pool compiles a unit on a table's critical path in parts (docs/DESIGN.md, "A unit's kernels
// over several workers"): never; where its cost model says the parts end sooner than the unit whole
// (the default); or wherever a unit may be split (to compare).
enum class SplitMode { off, cost_model, always };
// KILN_JIT_SPLIT's meaning: "0" (off) never, "1" (on) always, unset, empty or "auto" the cost model.
// Anything else fails with the warning to print.
Result<SplitMode> jit_split_from(const char* value);

// KILN_JIT_MEMORY's meaning: the most memory one worker may allocate (its RLIMIT_DATA: heap and private
// mappings), a size as base/parse.hpp reads it ("8G", "512M"); "0" for no limit; unset or empty gives
// kDefaultWorkerMemory. A CUB unit's NVRTC takes ~320 MB and a PCH ~200 MB more: the default leaves
// room for the largest units many times over, and stops a program that would take the machine (a
// header of gigabytes, thousands of name expressions). Anything else fails with the warning to print.
inline constexpr std::uint64_t kDefaultWorkerMemory = std::uint64_t{8} << 30;
Result<std::uint64_t> jit_memory_from(const char* value);
// "8 GiB", "512 MiB", "no limit": how messages say a limit.
std::string describe_memory_limit(std::uint64_t bytes);

// Where the worker executable is looked for, in order: $KILN_JITD if set (then only there); else
// kiln-jitd next to libkiln (the build tree) and in libkiln's install libexecdir/kiln.
std::vector<std::filesystem::path> jit_worker_candidates();
// Whether `path` is a regular file this process may execute.
bool is_executable_file(const std::filesystem::path& path);
// The first candidate that is an executable file, or empty.
std::filesystem::path find_jit_worker();

// Workers run with glibc's malloc on transparent huge pages (docs/DESIGN.md, "Huge pages in the
// workers"): GLIBC_TUNABLES for a worker, given the host's value (null when unset), is the host's with
// kHugePagesTunable=1 added, unless the host's sets kHugePagesTunable itself (then it is kept as is).
inline constexpr std::string_view kHugePagesTunable = "glibc.malloc.hugetlb";
std::string worker_glibc_tunables(const char* host_value);
// The same for this process's workers: of its GLIBC_TUNABLES.
std::string worker_glibc_tunables();
// A worker's environment: `host`'s (a null-terminated array, as environ), its GLIBC_TUNABLES replaced by
// worker_glibc_tunables of it.
std::vector<std::string> worker_environment(const char* const* host);

}  // namespace kiln::detail
