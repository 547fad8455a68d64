// The NVRTC and nvJitLink versions a cache key names: those this process would load, known on a disk hit
// without loading them.
//
// The key must change when the compilers do (an upgraded libnvrtc.so.13 must not reuse old entries), but
// a process that only loads entries from disk must not pay a dlopen of NVRTC (~100 MB) to learn its
// version. So the first process that loads them records, in the cache's version directory (file
// `compilers`), the versions with what decided them: each library's file (path, device, inode, size,
// mtime) and what the dynamic loader searched (LD_LIBRARY_PATH, /etc/ld.so.cache's identity). Later
// processes stat those and use the recorded versions when nothing changed; otherwise they load the
// libraries once and record them again. Each process keeps its answer (docs/DESIGN.md, "Tiers").
#pragma once

#include "base/result.hpp"
#include "base/file_identity.hpp"
#include "chain/unit_key.hpp"  // CompilerVersions, LoadedCompilers, LoadCompilers

#include <kiln/cache.hpp>

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace kiln::detail {

// What the dynamic loader's search depends on, besides the library files themselves.
struct LoaderSearch {
  std::string library_path;                // LD_LIBRARY_PATH
  std::optional<FileIdentity> cache_file;  // /etc/ld.so.cache
  friend bool operator==(const LoaderSearch&, const LoaderSearch&) = default;
};
LoaderSearch loader_search_now();

// The record file's text, and reading it back (nullopt for anything else).
inline constexpr const char* kCompilersRecordName = "compilers";
std::string encode_compilers_record(const LoaderSearch& search, const LoadedCompilers& loaded);
std::optional<std::pair<LoaderSearch, LoadedCompilers>> decode_compilers_record(std::string_view text);

// The versions for a key, with the record kept in the cache directory `dir` (a descriptor; -1 when the
// cache is not in use): the record's when its search and files are unchanged, else `load`'s (recorded
// anew when `dir` is given); when nothing can be loaded, the record's, else the toolkit kiln was built with.
CompilerVersions compiler_versions_at(int dir, const std::function<Result<LoadedCompilers>()>& load);

// compiler_versions_at with `cache`'s directory and `load` (the JIT's loader, jit/compiler/nvrtc_library.hpp:
// what is loaded is what the key names), once per process.
CompilerVersions compiler_versions(DiskCache& cache, LoadCompilers load);

}  // namespace kiln::detail
