// The per-key build lock never makes a process wait forever: a second, real process holds it while stopped
// (SIGSTOP), while busy for good, or after dying with a forked child still holding it.
#include <kiln/cache.hpp>
#include <doctest/doctest.h>

#include "cache_test_util.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

using kiln::test::ChildChecks;
using kiln::test::sample_entry;
using kiln::test::sample_key;

namespace {

using Clock = std::chrono::steady_clock;

// A process holding the build lock of sample_key(0) in `root`'s cache: it calls get_or_build, and its build
// function tells the test it runs (so the lock is held), then does `hold` until killed.
class Holder {
 public:
  Holder(const std::filesystem::path& root, const std::function<void()>& hold) {
    int ready[2];
    REQUIRE(::pipe(ready) == 0);
    std::fflush(nullptr);
    pid_ = ::fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      ::close(ready[0]);
      kiln::DiskCache cache(kiln::test::config_at(root));
      cache.get_or_build(sample_key(0), [&] {
        (void)!::write(ready[1], "x", 1);
        hold();
        return sample_entry(0);
      });
      ::_exit(0);
    }
    ::close(ready[1]);
    pollfd p{ready[0], POLLIN, 0};
    char byte = 0;
    const bool holding = ::poll(&p, 1, 30'000) == 1 && ::read(ready[0], &byte, 1) == 1;
    ::close(ready[0]);
    REQUIRE_MESSAGE(holding, "the holder did not take the lock within 30 s");
  }
  ~Holder() {
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  Holder(const Holder&) = delete;
  Holder& operator=(const Holder&) = delete;
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
};

// In a child bounded by alarm(): get_or_build of the held key with KILN_CACHE_LOCK_TIMEOUT=`timeout`, from
// the environment as a user would set it. The child reports through its checks; returns its status.
int waiter(const std::filesystem::path& root, const char* timeout, double at_most_seconds,
           const std::function<void(ChildChecks&, const kiln::DiskCache&)>& more = {}) {
  return kiln::test::run_in_child([&] {
    ::alarm(40);  // a waiter that hangs is killed: SIGALRM is the test's failure, not a hung suite
    ChildChecks checks;
    kiln::test::set_setting("KILN_CACHE_DIR", root.c_str());
    kiln::test::set_setting("KILN_CACHE_LOCK_TIMEOUT", timeout);
    kiln::DiskCache cache(kiln::CacheConfig::from_environment());
    const auto start = Clock::now();
    int builds = 0;
    const kiln::CacheEntry built = cache.get_or_build(sample_key(0), [&] {
      ++builds;
      return sample_entry(0);
    });
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    checks.expect(builds == 1, "built it itself");
    checks.expect(kiln::test::same_entry(built, sample_entry(0)), "the entry it built");
    checks.expect(seconds <= at_most_seconds, "done in " + std::to_string(seconds) + " s, at most " +
                                                  std::to_string(at_most_seconds) + " s");
    checks.expect(cache.load(sample_key(0)).has_value(), "and stored it");
    if (more) more(checks, cache);
    return checks.exit_code();
  });
}

bool one_warning_containing(const kiln::DiskCache& cache, std::string_view text) {
  const auto w = cache.warnings();
  return w.size() == 1 && w[0].find(text) != std::string::npos;
}

}  // namespace

TEST_CASE("a lock held by a stopped process (SIGSTOP): the next process builds without it at once, one warning") {
  kiln::test::TempDir tmp;
  Holder holder(tmp.path(), [] { ::raise(SIGSTOP); });
  // Stopped by now or very soon: the waiter must see it stopped whichever comes first.
  const int status = waiter(tmp.path(), "300", 20, [&](ChildChecks& checks, const kiln::DiskCache& cache) {
    checks.expect(one_warning_containing(cache, "pid " + std::to_string(holder.pid())),
                  "one warning naming the holder: " + (cache.warnings().empty() ? "" : cache.warnings()[0]));
    checks.expect(one_warning_containing(cache, "stopped"), "saying it is stopped");
  });
  CHECK(status == 0);
}

TEST_CASE("a lock held for good by a running process: the wait ends at KILN_CACHE_LOCK_TIMEOUT, then builds, one warning") {
  kiln::test::TempDir tmp;
  Holder holder(tmp.path(), [] {
    for (int i = 0; i < 600; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));  // killed long before
  });
  // 7 s: past the 62nd pause of the wait, where a pause doubled without end overflowed (UBSan's find).
  const auto start = Clock::now();
  const int status = waiter(tmp.path(), "7", 15, [&](ChildChecks& checks, const kiln::DiskCache& cache) {
    checks.expect(one_warning_containing(cache, "KILN_CACHE_LOCK_TIMEOUT"),
                  "one warning naming the variable: " + (cache.warnings().empty() ? "" : cache.warnings()[0]));
    checks.expect(one_warning_containing(cache, "pid " + std::to_string(holder.pid())), "and the holder");
  });
  CHECK(status == 0);
  CHECK(Clock::now() - start >= std::chrono::milliseconds(6900));  // it did wait, about the bound
}

TEST_CASE("a lock whose holder died while a forked child keeps it: broken at once, no warning needed") {
  kiln::test::TempDir tmp;
  int child_pid[2];
  REQUIRE(::pipe(child_pid) == 0);
  // The holder forks a child that inherits the locked descriptor (no exec), tells us its pid, and dies.
  Holder holder(tmp.path(), [&] {
    const pid_t keeper = ::fork();
    if (keeper == 0) {
      for (int i = 0; i < 600; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
      ::_exit(0);
    }
    (void)!::write(child_pid[1], &keeper, sizeof keeper);
    ::_exit(3);  // dies holding the lock; the kernel keeps it: the keeper shares the open file
  });
  pid_t keeper = -1;
  pollfd p{child_pid[0], POLLIN, 0};
  REQUIRE((::poll(&p, 1, 30'000) == 1 && ::read(child_pid[0], &keeper, sizeof keeper) == sizeof keeper));
  ::close(child_pid[0]);
  ::close(child_pid[1]);
  const int status = waiter(tmp.path(), "300", 20);
  CHECK(status == 0);
  ::kill(keeper, SIGKILL);  // reparented: not ours to wait for
}
