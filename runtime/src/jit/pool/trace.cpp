// The JIT pool's trace: JSON lines appended to $KILN_JIT_TRACE.
#include "jit/pool/trace.hpp"

#include "base/plain_file.hpp"
#include "base/settings.hpp"

#include <fcntl.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace kiln::detail {

namespace {

// The unit names kiln writes are a registry's and a table's: letters, digits, '_', '.', '/', '-'.
// Anything else is escaped all the same, so that every line parses.
std::string quoted(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\u%04x", static_cast<unsigned>(c));
      out += escaped;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string number(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f", v);
  return text;
}

}  // namespace

PoolTrace::PoolTrace() {
  const std::string path = setting("KILN_JIT_TRACE");
  if (path.empty()) return;
  // A regular file only: a FIFO with no reader must not block the pool's start (nor one with a reader
  // stall every compile).
  auto fd = open_regular(path.c_str(), O_WRONLY | O_APPEND | O_CREAT);
  if (fd) file_ = ::fdopen(fd->get(), "a");
  if (file_ != nullptr) (void)fd->release();
  else problem_ = "not tracing the JIT pool to KILN_JIT_TRACE=" + path + ": " +
                  (fd ? std::string("fdopen: ") + std::strerror(errno) : fd.error());
}

PoolTrace::~PoolTrace() {
  if (file_ != nullptr) std::fclose(file_);
}

double PoolTrace::ms(Clock::time_point t) const {
  return std::chrono::duration<double, std::milli>(t - origin_).count();
}

void PoolTrace::write(const std::string& line) {
  const std::lock_guard lock(mutex_);
  std::fputs(line.c_str(), file_);
  std::fflush(file_);  // whole lines, also when the process ends without destroying the pool
}

void PoolTrace::spawn(pid_t worker, Clock::time_point asked, Clock::time_point ready) {
  if (!on()) return;
  write("{\"event\":\"spawn\",\"worker\":" + std::to_string(worker) + ",\"at\":" + number(ms(asked)) +
        ",\"hello\":" + number(ms(ready)) + "}\n");
}

void PoolTrace::request(const Request& r) {
  if (!on()) return;
  write("{\"event\":\"request\",\"unit\":" + quoted(r.unit) + ",\"sm\":" + std::to_string(r.arch) +
        ",\"worker\":" + std::to_string(r.worker) + ",\"queued\":" + number(ms(r.queued)) +
        ",\"start\":" + number(ms(r.start)) + ",\"end\":" + number(ms(r.end)) + ",\"nvrtc\":" + number(r.nvrtc_ms) +
        ",\"link\":" + number(r.link_ms) + ",\"threads\":" + std::to_string(r.threads) + ",\"pch\":\"" + r.pch +
        "\",\"critical\":" + (r.critical ? "true" : "false") + ",\"beyond\":" + (r.beyond ? "true" : "false") +
        ",\"estimate\":" + number(r.estimate_ms) + (r.part.empty() ? "" : ",\"part\":" + quoted(r.part)) +
        ",\"slot_wait\":" + number(r.slot_asked == Clock::time_point{} ? 0.0 : std::chrono::duration<double, std::milli>(r.start - r.slot_asked).count()) +
        ",\"host_copy\":" + (r.host_copy ? "true" : "false") + ",\"host_unpack\":" + number(r.host_unpack_ms) +
        ",\"unpack\":" + number(r.unpack_ms) +
        ",\"origin\":" + number(std::chrono::duration<double, std::milli>(origin_.time_since_epoch()).count()) + "}\n");
}

void PoolTrace::split(const std::string& unit, unsigned arch, bool parts, const std::string& why, double estimate_ms,
                      double longest_part_ms) {
  if (!on()) return;
  write("{\"event\":\"split\",\"unit\":" + quoted(unit) + ",\"sm\":" + std::to_string(arch) +
        ",\"parts\":" + (parts ? "true" : "false") + ",\"why\":" + quoted(why) + ",\"estimate\":" +
        number(estimate_ms) + ",\"longest_part\":" + number(longest_part_ms) + "}\n");
}

}  // namespace kiln::detail
