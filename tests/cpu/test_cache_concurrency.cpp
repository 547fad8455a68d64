// 16 processes missing the same 20 keys at once build each key exactly once.
#include <kiln/cache.hpp>
#include <doctest/doctest.h>

#include "cache_test_util.hpp"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <sstream>
#include <thread>

using kiln::test::entries_dir;
using kiln::test::sample_entry;
using kiln::test::sample_key;

namespace {

constexpr int kProcesses = 16;
constexpr int kKeys = 20;

// One line per build, appended with O_APPEND so lines from different processes never interleave.
void record_build(const std::filesystem::path& log, int key) {
  const int fd = ::open(log.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  const std::string line = std::to_string(key) + " " + std::to_string(::getpid()) + "\n";
  if (fd >= 0) {
    (void)!::write(fd, line.data(), line.size());
    ::close(fd);
  }
}

}  // namespace

// The concurrency suite: also run under ThreadSanitizer (scripts/sanitize.sh).
TEST_SUITE_BEGIN("concurrency");

TEST_CASE("16 processes missing the same 20 keys at once: each key is built once, nothing is left over") {
  kiln::test::TempDir tmp;
  const auto config = kiln::test::config_at(tmp.path() / "kiln");
  const auto log = tmp.path() / "builds.log";
  { kiln::DiskCache create_dir(config); }

  // A pipe as a starting gun: every child blocks reading it until the parent closes the write end.
  int gun[2];
  REQUIRE(::pipe(gun) == 0);
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(gun[1]);
      char c;
      (void)!::read(gun[0], &c, 1);
      kiln::test::ChildChecks checks;
      kiln::DiskCache cache(config);
      for (int k = 0; k < kKeys; ++k) {
        const auto entry = cache.get_or_build(sample_key(k), [&] {
          record_build(log, k);
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
          return sample_entry(k);
        });
        checks.expect(kiln::test::same_entry(entry, sample_entry(k)), "entry of key " + std::to_string(k));
      }
      checks.expect(cache.stats().corrupt == 0 && cache.stats().store_failures == 0, "no corrupt entry, no failed store");
      checks.expect(cache.warnings().empty(), "no warning");
      std::fflush(nullptr);
      ::_exit(checks.exit_code());
    }
    children.push_back(pid);
  }
  ::close(gun[0]);
  ::close(gun[1]);
  for (const pid_t pid : children) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }

  std::map<int, int> builds;
  std::istringstream lines(kiln::test::read_bytes(log));
  for (int key, pid; lines >> key >> pid;) ++builds[key];
  CHECK(builds.size() == kKeys);
  for (const auto& [key, count] : builds) {
    CAPTURE(key);
    CHECK(count == 1);
  }
  const auto dir = entries_dir(tmp.path() / "kiln");
  CHECK(kiln::test::files_in(dir, ".kiln").size() == kKeys);
  CHECK(kiln::test::temp_and_lock_files(dir).empty());
}

TEST_SUITE_END();
