// The digests of programs' include directories, remembered for the process while their files stay as they
// were (program/program_key.hpp, remembered_directory_digest).
#include "program/program_key.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

namespace kiln::detail {
namespace {

// What the directory holds now, by the files' metadata alone: each regular file's path, size, inode, and
// times of change (mtime and ctime, to the nanosecond). An edited file changes its ctime even where its
// mtime is set back; a file added, removed or renamed changes the listing. Empty where it cannot be listed.
std::string listing(const std::string& dir) {
  namespace fs = std::filesystem;
  std::vector<std::string> lines;
  std::error_code ec;
  // As directory_digest walks it: links to directories followed; anything but a directory listed (a FIFO
  // added is a change, which directory_digest then refuses).
  for (fs::recursive_directory_iterator it(dir, fs::directory_options::follow_directory_symlink, ec), end;
       !ec && it != end; it.increment(ec)) {
    struct stat st {};
    if (::stat(it->path().c_str(), &st) != 0) return {};
    if (S_ISDIR(st.st_mode)) continue;
    if (lines.size() > kMaxIncludeFiles) return {};
    lines.push_back(it->path().string() + '\0' + std::to_string(st.st_mode) + ' ' + std::to_string(st.st_size) + ' ' +
                    std::to_string(st.st_ino) + ' ' +
                    std::to_string(st.st_mtim.tv_sec) + '.' + std::to_string(st.st_mtim.tv_nsec) + ' ' +
                    std::to_string(st.st_ctim.tv_sec) + '.' + std::to_string(st.st_ctim.tv_nsec) + '\n');
  }
  if (ec) return {};
  std::sort(lines.begin(), lines.end());
  std::string text;
  for (const std::string& l : lines) text += l;
  return text;
}

struct Remembered {
  std::string listing;
  std::string digest;
};

}  // namespace

Result<std::string> remembered_directory_digest(const std::string& dir, bool trigraphs) {
  static std::mutex& mutex = *new std::mutex;
  static auto& remembered = *new std::map<std::pair<std::string, bool>, Remembered>;
  const std::pair<std::string, bool> key{dir, trigraphs};
  std::string now = listing(dir);
  if (!now.empty()) {
    const std::lock_guard lock(mutex);
    const auto it = remembered.find(key);
    if (it != remembered.end() && it->second.listing == now) return it->second.digest;
  }
  Result<std::string> digest = directory_digest(dir, trigraphs);
  // Kept only where the listing taken before hashing is still the listing after it: a file changed
  // meanwhile is hashed again next time.
  if (digest && !now.empty() && listing(dir) == now) {
    const std::lock_guard lock(mutex);
    if (remembered.size() >= 64) remembered.clear();  // bounded: a process with many directories rehashes
    remembered[key] = {std::move(now), *digest};
  }
  return digest;
}

}  // namespace kiln::detail
