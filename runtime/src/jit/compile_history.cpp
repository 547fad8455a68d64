// The compile times kept in the cache directory (jit/compile_history.hpp).
#include "jit/compile_history.hpp"

#include "base/plain_file.hpp"
#include "chain/entry.hpp"  // entries_path

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <memory>

namespace kiln::detail {
namespace {

// A digest is SHA-256 hex; anything else on a line means the line is not one of kiln's.
bool is_digest(std::string_view s) {
  if (s.size() != 64) return false;
  for (const char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

std::string line_of(std::string_view digest, double ms) {
  char number[32];
  const int n = std::snprintf(number, sizeof number, "%.1f", ms);
  return std::string(digest) + " " + std::string(number, n > 0 ? static_cast<std::size_t>(n) : 0) + "\n";
}

// What is read of the file: at most kMaxBytes, from its end (the latest lines).
std::string read_tail(const std::filesystem::path& file) {
  auto fd = open_regular(file, O_RDONLY);
  if (!fd) return {};
  struct stat st{};
  if (::fstat(fd->get(), &st) != 0 || st.st_size <= 0) return {};
  const auto size = static_cast<std::size_t>(st.st_size);
  const std::size_t want = std::min(size, CompileHistory::kMaxBytes);
  std::string text(want, '\0');
  std::size_t got = 0;
  while (got < want) {
    const ssize_t n = ::pread(fd->get(), text.data() + got, want - got, static_cast<off_t>(size - want + got));
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  text.resize(got);
  if (size > want) text.erase(0, std::min(text.size(), text.find('\n') + 1));  // a line cut in two
  return text;
}

}  // namespace

CompileHistory::CompileHistory(std::filesystem::path dir) : file_(dir.empty() ? dir : dir / kFileName) {}

std::map<std::string, double> CompileHistory::parse(std::string_view text) {
  std::map<std::string, double> times;
  while (!text.empty()) {
    const std::size_t end = std::min(text.find('\n'), text.size());
    const std::string_view line = text.substr(0, end);
    text.remove_prefix(std::min(text.size(), end + 1));
    const std::size_t space = line.find(' ');
    if (space == std::string_view::npos || !is_digest(line.substr(0, space))) continue;
    const std::string_view number = line.substr(space + 1);
    double ms = 0;
    const auto [at, ec] = std::from_chars(number.data(), number.data() + number.size(), ms);
    if (ec != std::errc{} || at != number.data() + number.size() || !std::isfinite(ms) || ms <= 0 || ms > 1e8) continue;
    times[std::string(line.substr(0, space))] = ms;
  }
  return times;
}

void CompileHistory::load() {
  if (loaded_) return;
  loaded_ = true;
  if (file_.empty()) return;
  times_ = parse(read_tail(file_));
}

std::optional<double> CompileHistory::lookup(std::string_view digest) {
  const std::lock_guard lock(mutex_);
  load();
  const auto it = times_.find(std::string(digest));
  if (it == times_.end()) return std::nullopt;
  return it->second;
}

void CompileHistory::record(std::string_view digest, double ms) {
  if (!is_digest(digest) || !std::isfinite(ms) || ms <= 0) return;
  const std::lock_guard lock(mutex_);
  load();
  times_[std::string(digest)] = ms;
  if (file_.empty()) return;
  try {
    const std::string line = line_of(digest, ms);
    auto fd = open_regular(file_, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW);
    if (!fd) return;
    (void)::fchmod(fd->get(), 0600);  // as the cache's other files
    struct stat st{};
    if (::fstat(fd->get(), &st) == 0 && static_cast<std::size_t>(st.st_size) + line.size() > kMaxBytes) {
      // Full: rewritten to half its bound with what this process knows (the file's lines it read
      // included) and the new line; the times left out are forgotten here too, so memory stays bounded.
      std::string text;
      for (auto it = times_.begin(); it != times_.end();) {
        if (it->first != digest && text.size() + 2 * line.size() < kMaxBytes / 2) {
          text += line_of(it->first, it->second);
          ++it;
        } else if (it->first != digest) {
          it = times_.erase(it);
        } else {
          ++it;
        }
      }
      text += line;
      if (auto replacing = ReplacingFile::create(file_); replacing && replacing->write(text) && replacing->commit())
        (void)::chmod(file_.c_str(), 0600);
      return;
    }
    (void)!::write(fd->get(), line.data(), line.size());  // one write: lines of other processes do not interleave
  } catch (...) {
    // A history that cannot be kept only makes the next estimate a guess.
  }
}

CompileHistory& compile_history(const std::filesystem::path& root) {
  static std::mutex& mutex = *new std::mutex;
  static auto& histories = *new std::map<std::filesystem::path, std::unique_ptr<CompileHistory>>;
  const std::lock_guard lock(mutex);
  auto& h = histories[root];
  if (!h) h = std::make_unique<CompileHistory>(root.empty() ? root : entries_path(root));
  return *h;
}

}  // namespace kiln::detail
