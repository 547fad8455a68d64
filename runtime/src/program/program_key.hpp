// What a program given at run time is keyed by: the digest of its content, never of a path.
#pragma once

#include "base/field.hpp"  // append_field
#include "base/result.hpp"

#include <kiln/program.hpp>

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::detail {


// SHA-256 (hex) over the files under `dir`: each regular file's path relative to `dir` and its bytes, in
// path order; or why it cannot be taken: unreadable, over kMaxIncludeBytes or kMaxIncludeFiles (sizes
// from stat, before a byte is read), a FIFO, socket or device in it, or a file whose includes kiln cannot
// key (scan_includes, with `trigraphs` as the program's standard has them).
inline constexpr std::uint64_t kMaxIncludeBytes = std::uint64_t{256} << 20;
inline constexpr std::size_t kMaxIncludeFiles = 100'000;
Result<std::string> directory_digest(const std::string& dir, bool trigraphs = false);
// directory_digest, remembered for the process while every file under `dir` keeps its path, size, inode,
// mtime and ctime (a stat of each file per call, not a read): a program made many times with the same
// include directories (a library rendering many kernels) hashes them once (program/directory_digests.cpp).
Result<std::string> remembered_directory_digest(const std::string& dir, bool trigraphs = false);

// The program's digest: SHA-256 (hex) over its source, each header's name and bytes, its options (an
// include directory as directory_digest of its files), and its name expressions, each length-prefixed.
// Throws Error(invalid_argument) naming the label and the directory when an include directory cannot be
// read.
std::string program_digest(const ProgramSource& source);

// The toolkit's CCCL headers a program may include (<cub/...>, <thrust/...>, <cuda/...>): their
// directory, searched after the program's own, and CCCL's version ("3.0.1"); empty when the toolkit
// (KILN_TOOLKIT, else /usr/local/cuda) has none.
struct ToolkitHeaders {
  std::string include_dir;
  std::string cccl_version;
  std::filesystem::path toolkit_include;  // <toolkit>/include, resolved; empty where there is none
};
// Where `dir` lies in the toolkit's include directory ("include", "include/cccl", ...); empty where it
// lies outside it.
std::string toolkit_place(const std::string& dir);
const ToolkitHeaders& toolkit_headers();

}  // namespace kiln::detail
