// Files at a path a user names (cache packs, the JIT's trace): opened so that no open blocks and no link
// planted in a shared directory is written through.
#pragma once

#include "base/result.hpp"
#include "base/unique_fd.hpp"

#include <filesystem>
#include <string>
#include <string_view>

namespace kiln::detail {

// `path` opened with `flags` (O_RDONLY; O_WRONLY | O_APPEND | O_CREAT) and O_NONBLOCK, so that a FIFO or a
// device cannot block the open, then checked with fstat: anything but a regular file is refused ("a FIFO,
// not a regular file"). The descriptor then blocks as usual (O_NONBLOCK cleared). A failure names the path.
Result<UniqueFd> open_regular(const std::filesystem::path& path, int flags);

// A file that replaces `target` whole: written under an unpredictable name beside it, created exclusively
// and never through a link (mkostemp), then synced and renamed over it. A reader sees the old file or the
// whole new one; a link planted at the target or at a guessed temp name is never followed. The temp file
// is removed unless commit() succeeded. A target that exists and is neither a regular file nor a link (a
// device, a FIFO, a directory) is refused.
class ReplacingFile {
 public:
  static Result<ReplacingFile> create(const std::filesystem::path& target);
  ReplacingFile(ReplacingFile&& other) noexcept;
  ReplacingFile& operator=(ReplacingFile&&) = delete;
  ReplacingFile(const ReplacingFile&) = delete;
  ReplacingFile& operator=(const ReplacingFile&) = delete;
  ~ReplacingFile();

  Status write(std::string_view bytes);
  // Mode 0644 less the umask (as a file created by open), fsync, close, rename over the target.
  Status commit();

 private:
  ReplacingFile(std::filesystem::path target, std::string temp, UniqueFd fd);
  std::filesystem::path target_;
  std::string temp_;  // empty once renamed, or moved from
  UniqueFd fd_;
};

}  // namespace kiln::detail
