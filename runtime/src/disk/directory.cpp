// The cache directory and its version directory, opened under the one rule of base/private_dir.hpp.
#include "disk/directory.hpp"

#include "chain/entry.hpp"  // entries_path

#include <kiln/cache.hpp>

#include <string>

namespace kiln::detail {

namespace {

constexpr std::string_view kElsewhere = "point KILN_CACHE_DIR at a directory of your own";

std::string version_dir_name() { return entries_path({}).filename().string(); }

}  // namespace

Result<std::optional<PrivateDir>> open_cache_dir(const std::filesystem::path& root, bool create) {
  if (root.empty()) return fail("no cache directory: neither KILN_CACHE_DIR, XDG_CACHE_HOME nor HOME is set");
  auto top = open_private_dir(root, kElsewhere, create);
  if (!top || !*top) return top;
  auto entries = open_private_subdir(**top, version_dir_name(), kElsewhere, create);
  // Messages name the version directory as the configuration spells it, not as resolved.
  if (entries && *entries) (*entries)->path = entries_path(root);
  return entries;
}

}  // namespace kiln::detail
