// Directories only this user can write: made 0700, and one rule for refusing those others could change.
//
// The disk cache and the JIT tier's scratch directory (used when the cache is off) hold what kiln hands
// to NVRTC and the driver: a directory others can write lets them plant it. One rule decides, as ssh's
// StrictModes does for ~/.ssh: the path is a directory owned by the effective user that neither group
// nor others can write. (Symlinks are followed: what is vetted is the directory they lead to.)
#pragma once

#include "base/result.hpp"

#include <filesystem>
#include <string_view>

namespace kiln::detail {

// mkdir -p, with mode 0700 for every directory it creates (the XDG spec asks the same of cache dirs).
// A directory that exists but cannot be written (EACCES, EROFS) is fine: a read-only cache still serves.
Status make_private_dirs(const std::filesystem::path& dir);

// Whether `dir` follows the rule. The refusal names the directory, what is wrong and what to do;
// `elsewhere` is the way out to offer ("point KILN_CACHE_DIR at a directory of your own").
Status vet_private_dir(const std::filesystem::path& dir, std::string_view elsewhere);

}  // namespace kiln::detail
