// The JIT pool's trace (KILN_JIT_TRACE): one JSON line per worker started and per request answered, to
// see where a table's time went (which worker ran what, when, and how long it waited in the queue).
#pragma once

#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>
#include <sys/types.h>

namespace kiln::detail {

class PoolTrace {
 public:
  using Clock = std::chrono::steady_clock;

  // Appends to the file KILN_JIT_TRACE names, if set and not empty; otherwise traces nothing. A file
  // that cannot be opened is `problem()` (the pool warns once) and nothing is traced.
  PoolTrace();
  ~PoolTrace();
  PoolTrace(const PoolTrace&) = delete;
  PoolTrace& operator=(const PoolTrace&) = delete;

  bool on() const noexcept { return file_ != nullptr; }
  const std::string& problem() const noexcept { return problem_; }

  // {"event":"spawn","worker":PID,"at":MS,"hello":MS}: a worker asked for at `asked`, its hello by `ready`.
  void spawn(pid_t worker, Clock::time_point asked, Clock::time_point ready);
  // {"event":"request","unit":"REGISTRY/UNIT","sm":N,"worker":PID,"queued":MS,"start":MS,"end":MS,
  //  "nvrtc":MS,"link":MS,"threads":N,"pch":"none|create|use","critical":BOOL,"beyond":BOOL,"estimate":MS,
  //  ["part":"I/N",]"slot_wait":MS,"host_copy":BOOL,"host_unpack":MS,"unpack":MS,"origin":MS}: "part", for a
  //  part of a unit compiled in parts (its kernels' request, I of N); "origin" is when the pool was made
  //  on the machine's monotonic clock (CLOCK_MONOTONIC), so that origin + start and origin + end of two
  //  processes' traces compare. "host_copy": the request named the host's unpacked PCH (its unpacking
  //  before the request, "host_unpack", 0 where it was kept); "unpack": the worker's own unpacking of the
  //  packed file (included in "nvrtc"; 0 where it opened the host's copy or kept its own).
  // A request's start is after its compile slot was taken (the machine-wide budget). "worker" is 0 for a
  // request compiled in this process (no worker could start); a worker's warm-up is unit "kiln/warm-up".
  struct Request {
    std::string unit;
    unsigned arch = 0;
    pid_t worker = 0;
    Clock::time_point queued, start, end;
    double nvrtc_ms = 0, link_ms = 0, estimate_ms = 0;
    unsigned threads = 1;
    const char* pch = "none";
    bool critical = false;
    bool beyond = false;  // on a worker beyond the steady count (the table's tail)
    Clock::time_point slot_asked{};  // when it asked for a slot of the machine-wide budget (at start: none)
    bool host_copy = false;
    double host_unpack_ms = 0, unpack_ms = 0;
    std::string part{};              // "I/N" for a part of a unit compiled in parts, else empty
  };
  void request(const Request& r);
  // {"event":"split","unit":"REGISTRY/UNIT","sm":N,"parts":BOOL,"why":"...","estimate":MS,"longest_part":MS}:
  // the cost model's decision for a unit on the critical path that may be compiled in parts.
  void split(const std::string& unit, unsigned arch, bool parts, const std::string& why, double estimate_ms,
             double longest_part_ms);

 private:
  double ms(Clock::time_point t) const;
  void write(const std::string& line);

  Clock::time_point origin_ = Clock::now();  // times are milliseconds since the pool was made
  std::FILE* file_ = nullptr;
  std::string problem_;
  std::mutex mutex_;
};

}  // namespace kiln::detail
