// Directories only this user can write, opened as descriptors: one rule for refusing those others could change.
//
// The disk cache and the JIT tier's scratch directory (used when the cache is off) hold what kiln hands
// to NVRTC and the driver: a directory others can write, or swap, lets them plant it. One rule decides,
// as ssh's StrictModes does for ~/.ssh:
//   - the directory itself is owned by the effective user, and neither group nor others can write it;
//   - every directory above it is owned by root or the effective user, and group and others cannot write
//     it unless it has the sticky bit (as /tmp: there others cannot rename or delete what is ours).
// The path is resolved once (a symlink the user configured is followed), then opened component by
// component from "/" with O_NOFOLLOW, each checked on the descriptor opened (fstat): what is used is
// exactly what was checked, and files inside are opened relative to it (openat), so a path swapped
// afterwards changes nothing.
#pragma once

#include "base/result.hpp"
#include "base/unique_fd.hpp"

#include <sys/stat.h>

#include <filesystem>
#include <optional>
#include <string_view>

namespace kiln::detail {

// A private directory, open (O_RDONLY | O_DIRECTORY), and the path it was opened by (for messages).
struct PrivateDir {
  UniqueFd fd;
  std::filesystem::path path;
};

// Opens `dir` under the rule, making it (and what is missing above it) 0700 first when `create` (the XDG
// spec asks the same of cache dirs). Nothing is made inside a directory the rule refuses. nullopt when it
// does not exist and `create` is false. A directory that exists but cannot be written (EACCES, EROFS) is
// fine: a read-only cache still serves. The refusal names the directory, what is wrong and what to do;
// `elsewhere` is the way out to offer ("point KILN_CACHE_DIR at a directory of your own").
Result<std::optional<PrivateDir>> open_private_dir(const std::filesystem::path& dir, std::string_view elsewhere,
                                                   bool create);

// The subdirectory `name` of `parent`, opened without following a symlink, made 0700 when missing and
// `create`, and checked by the same rule; nullopt when missing and not `create`.
Result<std::optional<PrivateDir>> open_private_subdir(const PrivateDir& parent, std::string_view name,
                                                      std::string_view elsewhere, bool create);

// For callers that hand the path on (the JIT's scratch directory goes to NVRTC by name): make `dir` (0700,
// as open_private_dir with `create`; refused when a directory above it is unsafe), and whether it follows
// the rule now (a missing directory does not).
Status make_private_dirs(const std::filesystem::path& dir);
Status vet_private_dir(const std::filesystem::path& dir, std::string_view elsewhere);

// The rule for the private directory itself, on what was opened (fstat), and that it is still linked
// (st_nlink > 0: not deleted since it was opened): a descriptor kept open can be checked again with one
// fstat instead of walking its path. The refusal names `shown`.
Status vet_private_dir(const struct stat& st, const std::filesystem::path& shown, std::string_view elsewhere);

// The rule for a file kiln reads from a private directory, on what was opened (fstat): a regular file
// owned by the effective user that group and others cannot write. The refusal names `shown`.
Status vet_private_file(const struct stat& st, const std::filesystem::path& shown);

// The rule for a directory above, applied to the directory a file kiln reads is in (as named, and as its
// symlinks resolve): whoever can rename entries there can put another file in its place. The failure
// names the directory, what is wrong and what to do.
Status vet_directory_of(const std::filesystem::path& file);

}  // namespace kiln::detail
