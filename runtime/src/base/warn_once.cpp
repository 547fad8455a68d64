// WarnOnce: one stderr line per kind of warning.
#include "base/warn_once.hpp"

#include <algorithm>
#include <cstdio>

namespace kiln::detail {

void WarnOnce::warn(std::string_view kind, const std::string& message) {
  const std::lock_guard lock(mutex_);
  if (std::find(kinds_.begin(), kinds_.end(), kind) != kinds_.end()) return;
  kinds_.emplace_back(kind);
  printed_.push_back(message);
  std::fprintf(stderr, "kiln: warning: %s\n", message.c_str());
}

std::vector<std::string> WarnOnce::printed() const {
  const std::lock_guard lock(mutex_);
  return printed_;
}

}  // namespace kiln::detail
