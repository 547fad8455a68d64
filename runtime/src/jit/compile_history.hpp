// How long units took to compile, kept in the cache directory across processes (as ninja keeps
// .ninja_log), so that the pool orders a later cold start by what it measured rather than by a guess.
#pragma once

#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

namespace kiln::detail {

// The file: one line per compile, "<unit digest> <milliseconds>", appended by every process using the
// cache (one write each, O_APPEND); the last line of a digest wins. The digest is the unit's content
// (source, headers, options, name expressions: UnitEntry::digest, a program's digest), not its key: the
// architecture and compilers are left out, so a cold start for another GPU finds the time of the same
// unit's compile for this one. Bounded: a process reads at most its last kMaxBytes, and one whose line
// would take it past that rewrites it (a whole new file renamed over it) to half the bound, with the
// times it knows and its new one; a time left out is a guess again next time, nothing worse.
class CompileHistory {
 public:
  static constexpr std::size_t kMaxBytes = 256 * 1024;
  static constexpr std::string_view kFileName = "compile-times";

  // The history in `dir` (the cache's version directory), read on first use. An empty dir keeps nothing.
  explicit CompileHistory(std::filesystem::path dir);

  // The last measured compile time of the unit of `digest` (one thread, nvrtc + link), or nullopt.
  std::optional<double> lookup(std::string_view digest);
  // Keeps `ms` for `digest`, here and in the file. Never throws; a file that cannot be written is skipped.
  void record(std::string_view digest, double ms);

  // Parses the file's text: each well-formed line's time by digest, later lines winning.
  static std::map<std::string, double> parse(std::string_view text);

 private:
  void load();  // under mutex_
  std::filesystem::path file_;
  std::mutex mutex_;
  bool loaded_ = false;
  std::map<std::string, double> times_;
};

// The process's history for the cache directory `root` (the one made per root, kept for the process).
CompileHistory& compile_history(const std::filesystem::path& root);

}  // namespace kiln::detail
