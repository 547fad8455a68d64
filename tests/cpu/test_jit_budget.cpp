// The machine-wide compile budget (jit/pool/machine_slots.hpp): slots held across threads and processes,
// released when their holder dies, every wait bounded; and two `kiln precompile` processes on one cache
// directory with a budget of one slot never compile at the same time (their JIT traces say so).
#include <doctest/doctest.h>

#include "jit/pool/machine_slots.hpp"

#include "cache_test_util.hpp"
#include "run_process.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <regex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

using kiln::detail::MachineSlots;
using namespace std::chrono_literals;

namespace {

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

TEST_CASE("machine slots: N held at once by a process's threads, the next waits within its bound") {
  kiln::test::TempDir tmp;
  MachineSlots slots(tmp.path(), 2);
  MachineSlots::Held a = slots.acquire(1s), b = slots.acquire(1s);
  CHECK(a.holds());
  CHECK(b.holds());
  const auto start = std::chrono::steady_clock::now();
  MachineSlots::Held c = slots.acquire(100ms);
  CHECK_FALSE(c.holds());
  CHECK(ms_since(start) >= 90);
  CHECK(ms_since(start) < 5000);
  // A waiter told to stop waiting stops at once.
  const auto stopped = std::chrono::steady_clock::now();
  CHECK_FALSE(slots.acquire(60s, [] { return false; }).holds());
  CHECK(ms_since(stopped) < 5000);
  // One given back is taken by the next waiter, from another thread.
  std::thread giver([&] {
    std::this_thread::sleep_for(50ms);
    a.release();
  });
  MachineSlots::Held d = slots.acquire(10s);
  giver.join();
  CHECK(d.holds());
  CHECK(slots.problem().empty());
  CHECK(std::filesystem::exists(tmp.path() / "jit-slots" / "slot-0.lock"));
  CHECK(std::filesystem::exists(tmp.path() / "jit-slots" / "slot-1.lock"));
}

TEST_CASE("machine slots: another process's slot is not taken, and comes free when that process dies") {
  kiln::test::TempDir tmp;
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(ready[0]);
    MachineSlots own(tmp.path(), 1);
    MachineSlots::Held held = own.acquire(10s);
    const char byte = held.holds() ? 'y' : 'n';
    (void)!::write(ready[1], &byte, 1);
    ::pause();  // killed by the parent, holding the slot
    ::_exit(0);
  }
  ::close(ready[1]);
  char byte = 0;
  REQUIRE(::read(ready[0], &byte, 1) == 1);
  ::close(ready[0]);
  CHECK(byte == 'y');
  MachineSlots slots(tmp.path(), 1);
  CHECK_FALSE(slots.acquire(100ms).holds());
  ::kill(child, SIGKILL);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(slots.acquire(10s).holds());  // the kernel dropped the dead holder's lock
}

TEST_CASE("machine slots: a stopped holder's slots are lent, one waiter each, and waited for again once it runs") {
  kiln::test::TempDir tmp;
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(ready[0]);
    MachineSlots own(tmp.path(), 2);
    MachineSlots::Held a = own.acquire(10s), b = own.acquire(10s);
    const char byte = a.holds() && b.holds() ? 'y' : 'n';
    (void)!::write(ready[1], &byte, 1);
    ::pause();  // killed by the parent, holding both slots
    ::_exit(0);
  }
  ::close(ready[1]);
  char byte = 0;
  REQUIRE(::read(ready[0], &byte, 1) == 1);
  ::close(ready[0]);
  REQUIRE(byte == 'y');
  // Stopped, as by kill -STOP or Ctrl-Z; waitpid says when the kernel has stopped it.
  REQUIRE(::kill(child, SIGSTOP) == 0);
  int status = 0;
  REQUIRE(::waitpid(child, &status, WUNTRACED) == child);
  REQUIRE(WIFSTOPPED(status));
  // Each MachineSlots opens its own files: as two processes, they never share a lock.
  MachineSlots first(tmp.path(), 2), second(tmp.path(), 2), third(tmp.path(), 2);
  MachineSlots::Held lent_a = first.acquire(20s);
  CHECK(lent_a.holds());  // without waiting out the 20 s
  MachineSlots::Held lent_b = second.acquire(20s);
  CHECK(lent_b.holds());
  CHECK_FALSE(third.acquire(100ms).holds());  // one waiter per stopped slot: still two compiles at most
  lent_a.release();
  CHECK(third.acquire(20s).holds());  // the stand-in given back is lent again
  // Continued, the holder is waited for again.
  REQUIRE(::kill(child, SIGCONT) == 0);
  REQUIRE(::waitpid(child, &status, WCONTINUED) == child);
  lent_b.release();
  CHECK_FALSE(second.acquire(100ms).holds());
  ::kill(child, SIGKILL);
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(second.acquire(10s).holds());
  CHECK(std::filesystem::exists(tmp.path() / "jit-slots" / "slot-0.standin.lock"));
}

TEST_CASE("machine slots: no budget without a directory, and a directory it cannot use is said once, never waited on") {
  MachineSlots none({}, 1);
  CHECK_FALSE(none.on());
  CHECK_FALSE(none.acquire(10s).holds());
  kiln::test::TempDir tmp;
  std::ofstream(tmp.path() / "file") << "not a directory";
  MachineSlots bad(tmp.path() / "file", 1);
  const auto start = std::chrono::steady_clock::now();
  CHECK_FALSE(bad.acquire(10s).holds());
  CHECK(ms_since(start) < 5000);
  CHECK(bad.problem().find("no machine-wide compile budget") == 0);
}

TEST_CASE("KILN_JIT_MACHINE_SLOTS: 1 to 4096, else the default with a warning") {
  CHECK(*kiln::detail::machine_slots_from(nullptr, 16) == 16);
  CHECK(*kiln::detail::machine_slots_from("", 16) == 16);
  CHECK(*kiln::detail::machine_slots_from("1", 16) == 1);
  for (const char* bad : {"0", "-1", "many", "4097"}) {
    CAPTURE(std::string(bad));
    const auto parsed = kiln::detail::machine_slots_from(bad, 16);
    REQUIRE_FALSE(parsed.ok());
    CHECK(parsed.error().find("KILN_JIT_MACHINE_SLOTS=") == 0);
  }
}

#ifdef KILN_TEST_CLI
namespace {

// [origin + start, origin + end] of every request a JIT trace holds: the machine's monotonic clock.
std::vector<std::pair<double, double>> compiles_in(const std::filesystem::path& trace) {
  std::vector<std::pair<double, double>> spans;
  std::ifstream in(trace);
  const std::regex field("\"(start|end|origin)\":([0-9.]+)");
  for (std::string line; std::getline(in, line);) {
    if (line.find("\"event\":\"request\"") == std::string::npos) continue;
    double start = -1, end = -1, origin = -1;
    for (auto it = std::sregex_iterator(line.begin(), line.end(), field); it != std::sregex_iterator(); ++it) {
      const double v = std::stod((*it)[2]);
      if ((*it)[1] == "start") start = v;
      else if ((*it)[1] == "end") end = v;
      else origin = v;
    }
    REQUIRE_MESSAGE((start >= 0 && end >= start && origin >= 0), line);
    spans.emplace_back(origin + start, origin + end);
  }
  return spans;
}

}  // namespace

TEST_CASE("two processes on one cache directory with a budget of one slot never compile at once") {
  kiln::test::TempDir tmp;
  const auto cache = tmp.path() / "cache";
  // Two architectures: nothing one process compiles serves the other, so both compile every unit.
  const std::vector<std::string> archs{"sm_80", "sm_86"};
  std::vector<kiln::test::ProcessResult> results(archs.size());
  std::vector<std::thread> processes;
  for (std::size_t i = 0; i < archs.size(); ++i) {
    processes.emplace_back([&, i] {
      results[i] = kiln::test::run_process(
          {KILN_TEST_CLI, "precompile", "--arch", archs[i], "vector_add", "scale_f32", "scale_f64"},
          {{"KILN_CACHE_DIR", cache.string()}, {"KILN_CACHE", std::nullopt}, {"KILN_JIT_MACHINE_SLOTS", "1"},
           {"KILN_JIT_WORKERS", "2"}, {"KILN_JIT_TRACE", (tmp.path() / ("trace-" + archs[i])).string()},
           {"KILN_REMOTE_CACHE", std::nullopt}, {"KILN_JIT_SPLIT", "0"}},  // whole units: a compile each
          std::chrono::seconds(240));
    });
  }
  for (auto& p : processes) p.join();
  std::vector<std::pair<double, double>> spans;
  for (std::size_t i = 0; i < archs.size(); ++i) {
    INFO(archs[i], ": ", results[i].output);
    CHECK(results[i].status == 0);
    const auto own = compiles_in(tmp.path() / ("trace-" + archs[i]));
    CHECK(own.size() == 2);  // vector_add and scale, each compiled once
    spans.insert(spans.end(), own.begin(), own.end());
  }
  std::sort(spans.begin(), spans.end());
  for (std::size_t i = 1; i < spans.size(); ++i) {
    CAPTURE(i);
    CHECK(spans[i].first >= spans[i - 1].second);  // each starts after the one before it ended
  }
  CHECK(std::filesystem::exists(cache / "jit-slots" / "slot-0.lock"));
}
#endif
