// Where NVRTC's automatic PCH keeps its files: a directory private to each process, named the same in all.
//
// With -pch, NVRTC writes each precompiled header to a file in -pch-dir (~170 MiB for a CUB prefix) and
// reads that file back on every warm compile. The file is good only in the process that made it, and its
// forks: another process refuses it ("incompatible precompiled header (PCH) heap allocation address"),
// and processes sharing a directory delete each other's files, which fails their compiles ("error while
// deleting file ...": the soak found it). So every process gets its own directory, <base>/<pid>.<random>/,
// holding a lock file for as long as the process lives.
//
// NVRTC reuses a PCH only under identical options, and a forked worker must keep reusing its parent's.
// So the option names the directory as /proc/self/fd/<n>: the same string in every process, a different
// directory in each. After fork() the child replaces descriptor n with a directory of its own holding
// hard links to its parent's files (measured here on the CUB unit: 198 ms for the child's first compile,
// against 1.75 s with an empty directory).
//
// Directories go when their process exits normally; those of killed processes (lock no longer held) are
// removed by the next process that makes one under the same base.
#pragma once

#include <string>

namespace kiln::detail {

// The -pch-dir value for requests whose pch_dir is `base`: this process's directory under it, made on
// first use (and `base` too, 0700). Empty, with a line in `log`, when none can be made: the compile then
// goes on without a PCH, only slower. Thread-safe.
std::string private_pch_dir(const std::string& base, std::string& log);

// Removes this process's directories now (never a parent's). Runs at a normal exit anyway; a worker that
// ends through _exit calls it first.
void remove_private_pch_dirs();

// In a child, right after fork() and before it compiles: each of the parent's directories is replaced,
// under the same descriptor, by one of the child's own with hard links to the parent's files.
void private_pch_dirs_after_fork();

}  // namespace kiln::detail
