// The cache directory: made private (0700) when missing, refused when others could write it.
#pragma once

#include "base/result.hpp"

#include <filesystem>

namespace kiln::detail {

// <root>/v<format version>, where entry, temp and lock files live: missing directories are made 0700,
// then the root and the version directory must follow base/private_dir.hpp's rule. Also run before
// every store, so that a directory deleted while in use is made again, and one made unsafe is refused.
// The refusal says which directory, what is wrong and what to do.
Result<std::filesystem::path> open_cache_dir(const std::filesystem::path& root);

// Whether entries under `root` may be loaded now: the root and the version directory still follow the
// rule (open_cache_dir's refusal if not). Fine when they are gone: nothing loads from what is not there.
Status cache_dir_still_private(const std::filesystem::path& root);

}  // namespace kiln::detail
