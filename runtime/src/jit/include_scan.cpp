// The bytes a source includes from its include directories (jit/include_scan.hpp).
#include "jit/include_scan.hpp"

#include "base/plain_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <deque>
#include <set>

namespace kiln::detail {
namespace {

// The names of the #include lines of `text`, as written between <> or "".
std::vector<std::string> includes_of(std::string_view text) {
  std::vector<std::string> names;
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t end = std::min(text.find('\n', at), text.size());
    std::string_view line = text.substr(at, end - at);
    at = end + 1;
    const std::size_t hash = line.find_first_not_of(" \t");
    if (hash == std::string_view::npos || line[hash] != '#') continue;
    line.remove_prefix(hash + 1);
    line.remove_prefix(std::min(line.size(), line.find_first_not_of(" \t")));
    if (!line.starts_with("include")) continue;
    line.remove_prefix(7);
    line.remove_prefix(std::min(line.size(), line.find_first_not_of(" \t")));
    if (line.empty() || (line[0] != '<' && line[0] != '"')) continue;
    const char close = line[0] == '<' ? '>' : '"';
    const std::size_t stop = line.find(close, 1);
    if (stop != std::string_view::npos && stop > 1) names.emplace_back(line.substr(1, stop - 1));
  }
  return names;
}

// A regular file's size, and its text when at most kMaxScannedBytes; nullopt when it is not one.
bool read_small(const std::string& path, std::uint64_t& size, std::string& text) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  size = static_cast<std::uint64_t>(st.st_size);
  text.clear();
  if (size > kMaxScannedBytes) return true;
  auto fd = open_regular(path, O_RDONLY);
  if (!fd) return true;
  text.resize(size);
  std::size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(fd->get(), text.data() + got, text.size() - got);
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  text.resize(got);
  return true;
}

}  // namespace

std::vector<std::string> include_dirs_of(std::string_view options) {
  std::vector<std::string> lines, dirs;
  for (std::size_t at = 0; at <= options.size();) {
    const std::size_t end = std::min(options.find('\n', at), options.size());
    lines.emplace_back(options.substr(at, end - at));
    at = end + 1;
  }
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::string& o = lines[i];
    if ((o == "-I" || o == "--include-path") && i + 1 < lines.size()) dirs.push_back(lines[++i]);
    else if (o.starts_with("--include-path=")) dirs.push_back(o.substr(15));
    else if (o.starts_with("-I") && o.size() > 2) dirs.push_back(o.substr(2));
  }
  return dirs;
}

std::uint64_t included_bytes(std::string_view source, const std::vector<std::string_view>& given,
                             const std::vector<std::string>& dirs) {
  std::uint64_t total = 0;
  std::set<std::string> seen;
  // Each name to find, with the directory of the file that includes it (searched first, as a compiler
  // searches a quoted include's own directory; empty for the source, whose directory is none).
  std::deque<std::pair<std::string, std::string>> pending;
  for (auto& n : includes_of(source)) pending.emplace_back(std::move(n), std::string());
  std::string text;
  std::vector<std::string> places;
  while (!pending.empty() && seen.size() < kMaxScannedFiles) {
    const auto [name, from] = std::move(pending.front());
    pending.pop_front();
    if (name.empty() || std::find(given.begin(), given.end(), name) != given.end()) continue;
    places.clear();
    if (!from.empty()) places.push_back(from);
    places.insert(places.end(), dirs.begin(), dirs.end());
    for (const std::string& dir : places) {
      const std::string path = dir + "/" + name;
      std::uint64_t size = 0;
      if (seen.count(path) != 0) break;  // found here before
      if (!read_small(path, size, text)) continue;
      seen.insert(path);
      total += size;
      const std::string here = path.substr(0, path.rfind('/'));
      for (auto& n : includes_of(text)) pending.emplace_back(std::move(n), here);
      break;
    }
  }
  return total;
}

}  // namespace kiln::detail
