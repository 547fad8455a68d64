// Finding, creating and vetting the cache directory (private, like ssh's StrictModes).
#pragma once

#include <filesystem>
#include <string>

namespace kiln::detail {

struct CacheDir {
  std::filesystem::path entries;  // <root>/v<format version>: where entry, temp and lock files live
  std::string refusal;            // empty when usable; else which directory, what is wrong and what to do
};

// Creates missing directories 0700, then refuses the root or the version directory if it is not a
// directory owned by the effective user, or if group or others can write it. Also run before every
// store, so that a directory deleted while in use is made again, and one made unsafe is refused.
CacheDir open_cache_dir(const std::filesystem::path& root);

// Why entries under `root` must not be loaded now: the root or the version directory exists but is no
// longer private (open_cache_dir's refusal). Empty when they are fine, and when they are gone: nothing
// can be loaded from a directory that is not there.
std::string unsafe_cache_dir(const std::filesystem::path& root);

}  // namespace kiln::detail
