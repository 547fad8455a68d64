// A writer killed with SIGKILL mid-publish leaves no readable partial entry, only a
// temp file that prune removes.
#include <kiln/cache.hpp>
#include <doctest/doctest.h>

#include "cache_test_util.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <random>
#include <thread>

using kiln::test::entries_dir;
using kiln::test::sample_entry;
using kiln::test::sample_key;

namespace {

constexpr int kKeys = 4;
constexpr std::size_t kBigCode = 8 << 20;  // 8 MiB entries take milliseconds to write: a wide window

}  // namespace

TEST_CASE("SIGKILL at random points of a store loop never leaves a readable partial entry") {
  kiln::test::TempDir tmp;
  const auto config = kiln::test::config_at(tmp.path());
  const auto dir = entries_dir(tmp.path());
  // The entries, encoded once here: the children only write.
  std::vector<kiln::CacheEntry> entries;
  for (int k = 0; k < kKeys; ++k) entries.push_back(sample_entry(k, 90, kBigCode));

  std::mt19937 rng(2024);
  int rounds_with_temp_file = 0;
  int rounds = 0;
  // Several rounds, half of them killing while a temp file exists; keep going (up to 40) until kills
  // have landed mid-write at least 3 times (the temp file may be renamed between the look and the kill).
  while (rounds < 8 || (rounds_with_temp_file < 3 && rounds < 40)) {
    ++rounds;
    const pid_t writer = ::fork();
    if (writer == 0) {
      kiln::DiskCache cache(config);
      for (int i = 0;; ++i) cache.store(sample_key(i % kKeys), entries[static_cast<std::size_t>(i % kKeys)]);
    }
    if (rounds % 2) {
      // A random point: anywhere in encoding, writing, renaming or pruning.
      std::this_thread::sleep_for(std::chrono::microseconds(5000 + rng() % 60000));
    } else {
      // Mid-write for sure, however loaded the machine: wait until a temp file exists, then kill.
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (kiln::test::temp_and_lock_files(dir).empty() && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    ::kill(writer, SIGKILL);
    int status = 0;
    ::waitpid(writer, &status, 0);
    REQUIRE(WIFSIGNALED(status));

    const auto temps = kiln::test::temp_and_lock_files(dir);
    rounds_with_temp_file += !temps.empty();
    kiln::DiskCache cache(config);
    for (int k = 0; k < kKeys; ++k) {
      const auto loaded = cache.load(sample_key(k));
      if (loaded) CHECK(kiln::test::same_entry(*loaded, entries[static_cast<std::size_t>(k)]));
    }
    CHECK(cache.stats().corrupt == 0);
    const auto report = cache.prune(config.max_bytes);
    CHECK(report.stray_removed == temps.size());
    CHECK(kiln::test::temp_and_lock_files(dir).empty());
  }
  MESSAGE(rounds << " rounds, " << rounds_with_temp_file << " killed mid-write");
  CHECK(rounds_with_temp_file >= 3);
}
