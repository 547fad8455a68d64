// Warnings printed once per kind per object: a broken cache or pool says so once, not on every call.
#pragma once

#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::detail {

class WarnOnce {
 public:
  // Prints "kiln: warning: <message>" to stderr the first time a warning of `kind` comes up; later
  // ones of the kind are dropped. Thread-safe.
  void warn(std::string_view kind, const std::string& message);
  // The messages printed so far, in order (for tests and `kiln cache`).
  std::vector<std::string> printed() const;

 private:
  mutable std::mutex mutex_;
  std::vector<std::string> kinds_;
  std::vector<std::string> printed_;
};

}  // namespace kiln::detail
