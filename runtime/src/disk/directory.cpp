// The cache directory and its version directory, made and vetted by the one rule of base/private_dir.hpp.
#include "disk/directory.hpp"

#include "base/private_dir.hpp"

#include <kiln/cache.hpp>

#include <sys/stat.h>

#include <string>

namespace kiln::detail {

namespace {

constexpr std::string_view kElsewhere = "point KILN_CACHE_DIR at a directory of your own";

std::filesystem::path entries_dir(const std::filesystem::path& root) {
  std::string version_dir = "v";
  version_dir += std::to_string(kCacheFormatVersion);
  return root / version_dir;
}

Status vet_both(const std::filesystem::path& root, const std::filesystem::path& entries) {
  if (Status root_ok = vet_private_dir(root, kElsewhere); !root_ok) return root_ok;
  return vet_private_dir(entries, kElsewhere);
}

}  // namespace

Result<std::filesystem::path> open_cache_dir(const std::filesystem::path& root) {
  if (root.empty()) return fail("no cache directory: neither KILN_CACHE_DIR, XDG_CACHE_HOME nor HOME is set");
  std::filesystem::path entries = entries_dir(root);
  if (Status made = make_private_dirs(entries); !made) return fail(made.error());
  if (Status vetted = vet_both(root, entries); !vetted) return fail(vetted.error());
  return entries;
}

Status cache_dir_still_private(const std::filesystem::path& root) {
  const std::filesystem::path entries = entries_dir(root);
  struct stat st {};
  if (::stat(entries.c_str(), &st) != 0) return ok();  // gone (or unreachable): every load misses anyway
  return vet_both(root, entries);
}

}  // namespace kiln::detail
