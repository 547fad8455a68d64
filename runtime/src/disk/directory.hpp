// The cache directory: its version directory opened (and made 0700 when missing) under the private rule.
#pragma once

#include "base/private_dir.hpp"
#include "base/result.hpp"

#include <filesystem>
#include <optional>

namespace kiln::detail {

// <root>/v<format version>, where entry, temp and lock files live, opened as a descriptor that every
// file of the cache is then opened relative to: the root under base/private_dir.hpp's rule (and every
// directory above it), then the version directory, never through a symlink. With `create` (the
// constructor, every store and build), what is missing is made 0700, so a directory deleted while in use
// is made again; nothing is made inside a refused one. Without, nullopt when it is gone: every load then
// misses, with nothing to warn about. The refusal says which directory, what is wrong and what to do.
Result<std::optional<PrivateDir>> open_cache_dir(const std::filesystem::path& root, bool create);

}  // namespace kiln::detail
