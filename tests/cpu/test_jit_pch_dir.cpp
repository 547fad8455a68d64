// NVRTC's PCH files: a directory private to each process, the same -pch-dir in all, links for a forked child, cleanup.
#include <doctest/doctest.h>

#include "cache_test_util.hpp"
#include "jit/compiler/pch_dir.hpp"

#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fcntl.h>
#include <functional>

using kiln::detail::private_pch_dir;
using kiln::detail::private_pch_dirs_after_fork;
using kiln::test::ChildChecks;
using kiln::test::files_in;
using kiln::test::read_bytes;
using kiln::test::write_bytes;

namespace {

// Where a -pch-dir value really is.
std::filesystem::path resolved(const std::string& option) { return std::filesystem::canonical(option); }

// Runs `body` in a forked child, then removes the child's directories as an exiting worker does, and
// _exits (no static destructors: LeakSanitizer's check at exit cannot run in a child of this
// multithreaded test process). Returns its exit status.
int run_in_child_then_clean_up(const std::function<int()>& body) {
  return kiln::test::run_in_child([&] {
    const int code = body();
    kiln::detail::remove_private_pch_dirs();
    return code;
  });
}

void age(const std::filesystem::path& path, std::chrono::hours by) {
  std::filesystem::last_write_time(path, std::filesystem::file_time_type::clock::now() - by);
}

}  // namespace

TEST_CASE("each process gets its own PCH directory under the base, named by a descriptor; it goes when the process ends") {
  kiln::test::TempDir tmp;
  const auto base = tmp.path() / "pch";
  std::filesystem::path made;
  const int status = run_in_child_then_clean_up([&] {
    ChildChecks checks;
    std::string log;
    const std::string option = private_pch_dir(base.string(), log);
    checks.expect(log.empty(), "no problem: " + log);
    checks.expect(option.starts_with("/proc/self/fd/"), "named by its descriptor: " + option);
    checks.expect(private_pch_dir(base.string(), log) == option, "the same directory for the next request");
    const auto names = files_in(base);
    checks.expect(names.size() == 1 && names[0].starts_with(std::to_string(::getpid()) + "."),
                  "one directory, <pid>.<random>");
    checks.expect(resolved(option) == std::filesystem::canonical(base / names.at(0)), "the descriptor is that directory");
    checks.expect((std::filesystem::status(base).permissions() & std::filesystem::perms::all) ==
                      std::filesystem::perms::owner_all, "the base is private");
    write_bytes(std::filesystem::path(option) / "unit_0.pch", "a precompiled header");
    return checks.exit_code();
  });
  CHECK(status == 0);
  CHECK(files_in(base).empty());  // gone with its process
}

TEST_CASE("a forked child gets a directory of its own, under the same -pch-dir, holding links to its parent's files") {
  kiln::test::TempDir tmp;
  const auto base = tmp.path() / "pch";
  const int status = run_in_child_then_clean_up([&] {
    ChildChecks checks;
    std::string log;
    const std::string option = private_pch_dir(base.string(), log);
    const auto parents = resolved(option);
    write_bytes(parents / "unit_0.pch", "the parent's header");
    std::fflush(nullptr);
    const pid_t child = ::fork();
    if (child == 0) {
      ChildChecks in_child;
      private_pch_dirs_after_fork();
      std::string child_log;
      in_child.expect(private_pch_dir(base.string(), child_log) == option, "the same option string");
      in_child.expect(resolved(option) != parents, "another directory");
      in_child.expect(read_bytes(std::filesystem::path(option) / "unit_0.pch") == "the parent's header",
                      "the parent's file, linked");
      write_bytes(std::filesystem::path(option) / "unit_1.pch", "the child's header");
      std::remove((std::filesystem::path(option) / "unit_0.pch").c_str());  // as NVRTC may: only the link goes
      kiln::detail::remove_private_pch_dirs();
      std::fflush(nullptr);
      ::_exit(in_child.exit_code());
    }
    int child_status = 0;
    ::waitpid(child, &child_status, 0);
    checks.expect(WIFEXITED(child_status) && WEXITSTATUS(child_status) == 0, "the child's checks");
    checks.expect(files_in(parents, ".pch") == std::vector<std::string>{"unit_0.pch"},
                  "the parent's directory has its own file, and not the child's");
    checks.expect(read_bytes(parents / "unit_0.pch") == "the parent's header", "intact");
    checks.expect(files_in(base).size() == 1, "the child's directory went with the child");
    return checks.exit_code();
  });
  CHECK(status == 0);
  CHECK(files_in(base).empty());
}

TEST_CASE("directories of processes that are gone are removed; a live process's is kept; loose old .pch files go") {
  kiln::test::TempDir tmp;
  const auto base = tmp.path() / "pch";
  std::filesystem::create_directories(base / "4000001.0badcafe");  // lock file there, nobody holds it
  write_bytes(base / "4000001.0badcafe" / "lock", "");
  write_bytes(base / "4000001.0badcafe" / "unit_0.pch", "left by a killed worker");
  std::filesystem::create_directories(base / "4000002.0ddba11");  // lock file held by a live process
  write_bytes(base / "4000002.0ddba11" / "lock", "");
  const int held = ::open((base / "4000002.0ddba11" / "lock").c_str(), O_RDWR | O_CLOEXEC);
  REQUIRE(held >= 0);
  REQUIRE(::flock(held, LOCK_EX | LOCK_NB) == 0);
  std::filesystem::create_directories(base / "4000003.5eed");  // no lock file: its maker died at once…
  age(base / "4000003.5eed", std::chrono::hours(1));             // …long ago
  std::filesystem::create_directories(base / "4000004.face");    // no lock file yet: being made now
  write_bytes(base / "examples.block_sum_f32_0.pch", "an older kiln's, two hours old");
  age(base / "examples.block_sum_f32_0.pch", std::chrono::hours(2));
  write_bytes(base / "examples.scale_0.pch", "an older kiln's, in use");
  write_bytes(base / "notes.txt", "not kiln's");

  const int status = kiln::test::run_in_child([&] {
    std::string log;
    return private_pch_dir(base.string(), log).empty() ? 1 : 0;
  });
  CHECK(status == 0);
  using std::filesystem::exists;
  CHECK_FALSE(exists(base / "4000001.0badcafe"));             // its process is gone
  CHECK(exists(base / "4000002.0ddba11" / "lock"));            // alive
  CHECK_FALSE(exists(base / "4000003.5eed"));                 // never locked, an hour old
  CHECK(exists(base / "4000004.face"));                       // never locked, but new
  CHECK_FALSE(exists(base / "examples.block_sum_f32_0.pch"));  // loose and old
  CHECK(exists(base / "examples.scale_0.pch"));                // loose but recent
  CHECK(exists(base / "notes.txt"));                           // not kiln's
  CHECK(files_in(base).size() == 5);  // those four, and the child's own (its _exit skipped the cleanup)
  ::close(held);
}

TEST_CASE("a base that cannot be made: no PCH, and the log says why") {
  kiln::test::TempDir tmp;
  write_bytes(tmp.path() / "file", "");
  const int status = kiln::test::run_in_child([&] {
    std::string log;
    const std::string option = private_pch_dir((tmp.path() / "file" / "pch").string(), log);
    return option.empty() && log.find("compiling without a precompiled header") != std::string::npos ? 0 : 1;
  });
  CHECK(status == 0);
}
