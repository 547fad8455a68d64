// Lock files that name their holder (base/lock_holder.hpp).
#include "base/lock_holder.hpp"

#include <unistd.h>

#include <charconv>
#include <fstream>
#include <sstream>
#include <string>

namespace kiln::detail {

std::optional<ProcessState> process_state(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!in || !std::getline(in, line)) return std::nullopt;
  // "pid (comm) S ppid ...": comm may hold spaces and parentheses, so fields count from the last ')'.
  const auto close = line.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(line.substr(close + 1));
  char state = '?';
  fields >> state;
  std::string skip;
  for (int field = 4; field < 22; ++field) fields >> skip;  // ppid .. itrealvalue
  ProcessState s;
  fields >> s.start_time;  // field 22
  if (state == 'Z' || state == 'X' || state == 'x') return std::nullopt;
  s.stopped = state == 'T' || state == 't';
  return s;
}

void record_holder(int fd) {
  const pid_t pid = ::getpid();
  const auto state = process_state(pid);
  const std::string text = std::to_string(pid) + " " + std::to_string(state ? state->start_time : 0) + "\n";
  if (::ftruncate(fd, 0) == 0) (void)!::pwrite(fd, text.data(), text.size(), 0);
}

std::optional<LockHolder> read_holder(int fd) {
  char text[64] = {};
  const ssize_t n = ::pread(fd, text, sizeof text - 1, 0);
  if (n <= 0) return std::nullopt;
  LockHolder h;
  const char* end = text + n;
  auto [p, ec] = std::from_chars(text, end, h.pid);
  if (ec != std::errc() || p == end || *p != ' ' || h.pid <= 0) return std::nullopt;
  auto [q, ec2] = std::from_chars(p + 1, end, h.start_time);
  if (ec2 != std::errc() || q == end || *q != '\n') return std::nullopt;
  return h;
}

HolderIs holder_is(const std::optional<LockHolder>& holder) {
  if (!holder) return HolderIs::unknown;
  const auto state = process_state(holder->pid);
  // Gone, or the pid now names another process (reused): whoever keeps the lock is not using it.
  if (!state || (holder->start_time != 0 && state->start_time != holder->start_time)) return HolderIs::gone;
  return state->stopped ? HolderIs::stopped : HolderIs::running;
}

}  // namespace kiln::detail
