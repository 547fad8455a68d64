// tests/cpu/test_jit_pool.cpp — the JIT worker pool: parallel workers, retry after a killed worker, in-process fallback, clean shutdown.
#include <doctest/doctest.h>

#include "cache_entry.hpp"
#include "cache_test_util.hpp"
#include "examples_catalog.hpp"
#include "fake_compile.hpp"
#include "jit_pool.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <set>

using kiln::detail::CompileOutcome;
using kiln::detail::CompileRequest;
using kiln::detail::JitPool;
using kiln::detail::JitPoolOptions;
using kiln::test::served_by;

namespace {

JitPoolOptions fake_pool(unsigned workers) {
  JitPoolOptions o;
  o.workers = workers;
  o.worker = KILN_TEST_FAKE_JITD;
  o.in_process = &kiln::test::fake_compile;
  return o;
}

CompileRequest fake_request(std::string unit, std::vector<std::string> options = {}) {
  CompileRequest r;
  r.registry = "tests";
  r.unit = std::move(unit);
  r.source_name = "tests." + r.unit + ".cu";
  r.source = "// the source of " + r.unit;
  r.options = std::move(options);
  r.kernels = {{r.unit + "_k", "_Z" + r.unit + "v"}};
  r.expressions = {r.unit + "_k"};
  r.arch = 90;
  return r;
}

// prefix + i, without operator+ on a literal: g++ 12 then warns falsely (-Wrestrict).
std::string numbered(std::string prefix, std::size_t i) {
  prefix += std::to_string(i);
  return prefix;
}

std::string option(const char* mode, const std::filesystem::path& dir, std::size_t n) {
  return std::string("fake:") + mode + "=" + dir.string() + ":" + std::to_string(n);
}

// Waits until `dir` holds `n` marks, and returns the pid named by the newest one not in `seen`.
pid_t wait_for_mark(const std::filesystem::path& dir, std::size_t n, std::set<pid_t>& seen) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (kiln::test::count_files(dir) < n && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  for (const auto& name : kiln::test::files_in(dir)) {
    const pid_t pid = static_cast<pid_t>(std::stol(name));
    if (seen.insert(pid).second) return pid;
  }
  FAIL("no new mark in " << dir);
  return -1;
}

bool gone(pid_t pid) {
  // A zombie still answers kill(pid, 0); a reaped child is no longer ours to wait for.
  errno = 0;
  const bool no_process = ::kill(pid, 0) == -1 && errno == ESRCH;
  errno = 0;
  const bool not_a_child = ::waitpid(pid, nullptr, WNOHANG) == -1 && errno == ECHILD;
  return no_process && not_a_child;
}

}  // namespace

TEST_CASE("KILN_JIT_WORKERS: a whole number from 1 to 256, else the default and one warning") {
  std::string warning;
  const unsigned fallback = kiln::detail::jit_workers_from(nullptr, warning);
  CHECK(fallback >= 1);
  CHECK(fallback <= 16);
  CHECK(kiln::detail::jit_workers_from("", warning) == fallback);
  CHECK(kiln::detail::jit_workers_from("5", warning) == 5);
  CHECK(kiln::detail::jit_workers_from("256", warning) == 256);
  CHECK(warning.empty());
  for (const char* bad : {"0", "-1", "4x", "abc", "257", " 4", "99999999999"}) {
    warning.clear();
    CHECK(kiln::detail::jit_workers_from(bad, warning) == fallback);
    CHECK(warning.find(std::string("'") + bad + "'") != std::string::npos);
  }

  kiln::test::ScopedEnv env("KILN_JIT_WORKERS", "lots");
  JitPoolOptions options = fake_pool(0);
  JitPool pool(options);
  CHECK(pool.max_workers() == fallback);
  REQUIRE(pool.warnings().size() == 1);
  CHECK(pool.warnings()[0].find("KILN_JIT_WORKERS='lots'") != std::string::npos);
}

TEST_CASE("the worker is found next to libkiln in the build tree, or where KILN_JITD says") {
  {
    kiln::test::ScopedEnv env("KILN_JITD", std::nullopt);
    CHECK(kiln::detail::find_jit_worker() == std::filesystem::canonical(KILN_TEST_JITD));
    const auto places = kiln::detail::jit_worker_candidates();
    REQUIRE(places.size() == 2);
    CHECK(places.back().filename() == "kiln-jitd");  // the install location, compiled in
    CHECK(places.back().parent_path().filename() == "kiln");
  }
  kiln::test::ScopedEnv env("KILN_JITD", KILN_TEST_FAKE_JITD);
  CHECK(kiln::detail::jit_worker_candidates() == std::vector<std::filesystem::path>{KILN_TEST_FAKE_JITD});
  CHECK(kiln::detail::find_jit_worker() == KILN_TEST_FAKE_JITD);
}

TEST_CASE("no worker starts before the first request; then requests run at once, each on its own worker") {
  constexpr std::size_t n = 4;
  kiln::test::TempDir marks;
  JitPool pool(fake_pool(n));
  CHECK(pool.worker_pids().empty());
  // Each request waits until all n are inside a worker: they can only finish if n workers run at once.
  std::vector<std::future<CompileOutcome>> futures;
  for (std::size_t i = 0; i < n; ++i)
    futures.push_back(pool.submit(fake_request(numbered("u", i), {option("gather", marks.path(), n)})));
  std::set<long> pids;
  for (std::size_t i = 0; i < n; ++i) {
    const CompileOutcome o = futures[i].get();
    REQUIRE_MESSAGE(o.ok, o.error);
    CHECK(o.entry.cubin == numbered("// the source of u", i));
    CHECK(o.entry.kernels.at(0).lowered == "_Zu" + std::to_string(i) + "v");
    CHECK(served_by(o) != ::getpid());
    pids.insert(served_by(o));
  }
  CHECK(pids.size() == n);
  CHECK(pool.worker_pids().size() == n);
  CHECK(pool.stats().spawned == n);
  CHECK(pool.warnings().empty());

  // More requests than workers queue, and reuse the same workers.
  std::vector<std::future<CompileOutcome>> more;
  for (std::size_t i = 0; i < 20; ++i) more.push_back(pool.submit(fake_request(numbered("q", i))));
  for (auto& f : more) {
    const CompileOutcome o = f.get();
    REQUIRE(o.ok);
    CHECK(pids.count(served_by(o)) == 1);
  }
  CHECK(pool.stats().spawned == n);
}

TEST_CASE("a worker killed mid-request: the request is retried once on a new worker and succeeds") {
  kiln::test::TempDir marks;
  JitPool pool(fake_pool(1));
  auto future = pool.submit(fake_request("victim", {option("hang", marks.path(), 1)}));
  std::set<pid_t> seen;
  const pid_t first = wait_for_mark(marks.path(), 1, seen);
  REQUIRE(::kill(first, SIGKILL) == 0);
  const CompileOutcome o = future.get();
  REQUIRE_MESSAGE(o.ok, o.error);
  CHECK(served_by(o) != first);
  CHECK(served_by(o) != ::getpid());
  const auto stats = pool.stats();
  CHECK(stats.deaths == 1);
  CHECK(stats.retried == 1);
  CHECK(stats.spawned == 2);
  CHECK(gone(first));
}

TEST_CASE("a worker killed twice: a clear error naming the unit and the signal, and the pool keeps serving") {
  kiln::test::TempDir marks;
  JitPool pool(fake_pool(1));
  auto future = pool.submit(fake_request("doomed", {option("hang", marks.path(), 2)}));
  std::set<pid_t> seen;
  const pid_t first = wait_for_mark(marks.path(), 1, seen);
  REQUIRE(::kill(first, SIGKILL) == 0);
  const pid_t second = wait_for_mark(marks.path(), 2, seen);
  CHECK(second != first);
  REQUIRE(::kill(second, SIGKILL) == 0);
  const CompileOutcome o = future.get();
  CHECK_FALSE(o.ok);
  INFO(o.error);
  CHECK(o.error.find("tests/doomed for sm_90") != std::string::npos);
  CHECK(o.error.find("died twice") != std::string::npos);
  CHECK(o.error.find("pid " + std::to_string(first) + " killed by signal 9") != std::string::npos);
  CHECK(o.error.find("pid " + std::to_string(second) + " killed by signal 9") != std::string::npos);

  const CompileOutcome next = pool.compile(fake_request("after"));
  REQUIRE_MESSAGE(next.ok, next.error);
  CHECK(served_by(next) != first);
  CHECK(served_by(next) != second);
  CHECK(pool.stats().deaths == 2);
}

TEST_CASE("an exception thrown in the worker reaches the caller as the same kiln::Error") {
  JitPool pool(fake_pool(1));
  const CompileOutcome before = pool.compile(fake_request("a"));
  try {
    pool.compile(fake_request("b", {"fake:throw"}));
    FAIL("no exception");
  } catch (const kiln::Error& e) {
    CHECK(e.code() == kiln::Errc::driver);
    CHECK(std::string(e.what()) == "fake: thrown in " + std::to_string(served_by(before)));
  }
  const CompileOutcome after = pool.compile(fake_request("c"));
  CHECK(served_by(after) == served_by(before));  // the worker survived it
  CHECK(pool.stats().deaths == 0);
}

TEST_CASE("no worker executable: requests compile in this process, with one warning that says how to fix it") {
  JitPoolOptions options = fake_pool(2);
  options.worker = "/nonexistent/kiln-jitd";
  JitPool pool(options);
  for (std::size_t i = 0; i < 3; ++i) {
    const CompileOutcome o = pool.compile(fake_request(numbered("here", i)));
    REQUIRE(o.ok);
    CHECK(served_by(o) == ::getpid());
  }
  REQUIRE(pool.warnings().size() == 1);
  CHECK(pool.warnings()[0].find("/nonexistent/kiln-jitd") != std::string::npos);
  CHECK(pool.warnings()[0].find("KILN_JITD") != std::string::npos);
  CHECK(pool.stats().in_process == 3);
  CHECK(pool.stats().spawned == 0);

  kiln::test::ScopedEnv env("KILN_JITD", "/nonexistent/from-env");
  JitPoolOptions from_env = fake_pool(1);
  from_env.worker.clear();
  JitPool pool2(from_env);
  CHECK(pool2.compile(fake_request("env")).ok);
  REQUIRE(pool2.warnings().size() == 1);
  CHECK(pool2.warnings()[0].find("KILN_JITD=/nonexistent/from-env is not an executable file") != std::string::npos);
}

TEST_CASE("a worker that does not speak the protocol: in-process fallback, and the child is reaped") {
  JitPoolOptions options = fake_pool(1);
  options.worker = "/bin/true";
  JitPool pool(options);
  const CompileOutcome o = pool.compile(fake_request("fallback"));
  REQUIRE(o.ok);
  CHECK(served_by(o) == ::getpid());
  REQUIRE(pool.warnings().size() == 1);
  CHECK(pool.warnings()[0].find("/bin/true did not start") != std::string::npos);
  CHECK(pool.worker_pids().empty());
  CHECK(pool.compile(fake_request("again")).ok);
  CHECK(pool.stats().spawned == 1);  // not tried again: it never worked
}

TEST_CASE("destruction reaps every worker, idle or busy, and fails what it did not compile") {
  std::vector<pid_t> pids;
  std::future<CompileOutcome> busy1, busy2, queued;
  kiln::test::TempDir marks;
  {
    JitPool pool(fake_pool(2));
    kiln::test::TempDir gather;
    auto a = pool.submit(fake_request("a", {option("gather", gather.path(), 2)}));
    auto b = pool.submit(fake_request("b", {option("gather", gather.path(), 2)}));
    REQUIRE(a.get().ok);
    REQUIRE(b.get().ok);
    busy1 = pool.submit(fake_request("busy1", {option("hang", marks.path(), 100)}));
    std::set<pid_t> seen;
    wait_for_mark(marks.path(), 1, seen);
    busy2 = pool.submit(fake_request("busy2", {option("hang", marks.path(), 100)}));
    wait_for_mark(marks.path(), 2, seen);  // both workers now hang
    queued = pool.submit(fake_request("queued"));
    pids = pool.worker_pids();
    REQUIRE(pids.size() == 2);
  }
  for (const pid_t pid : pids) CHECK(gone(pid));
  for (auto* busy : {&busy1, &busy2}) {
    const CompileOutcome b = busy->get();
    CHECK_FALSE(b.ok);
    CHECK(b.error.find("shut down while compiling unit tests/busy") != std::string::npos);
  }
  const CompileOutcome q = queued.get();
  CHECK_FALSE(q.ok);
  CHECK(q.error.find("shut down before compiling unit tests/queued") != std::string::npos);
}

TEST_CASE("the real kiln-jitd compiles an example unit with NVRTC") {
  const kiln::Catalog& catalog = kiln::examples::catalog();
  CompileRequest r;
  r.registry = std::string(catalog.name);
  r.unit = "scale";
  r.source_name = "examples.scale.cu";
  r.source = kiln::test::read_bytes(std::filesystem::path(KILN_TEST_KERNELS_DIR) / "scale.cu");
  r.options = {"--use_fast_math"};
  for (const char* name : {"scale_f32", "scale_f64"}) {
    const kiln::KernelEntry* k = catalog.find(name);
    REQUIRE(k != nullptr);
    r.kernels.push_back({name, std::string(catalog.str(k->lowered))});
    r.expressions.emplace_back(catalog.str(k->expression));
  }
  r.arch = 90;

  JitPoolOptions options;
  options.workers = 1;
  options.worker = KILN_TEST_JITD;
  JitPool pool(options);
  CompileOutcome o;
  try {
    o = pool.compile(r);
  } catch (const kiln::Error& e) {
    if (e.code() != kiln::Errc::no_compiler) throw;
    MESSAGE("skipped: NVRTC or nvJitLink is not installed here (" << e.what() << ")");
    return;
  }
  REQUIRE_MESSAGE(o.ok, o.error << "\n" << o.log);
  CHECK(pool.stats().spawned == 1);
  CHECK(pool.stats().in_process == 0);
  CHECK(o.entry.arch == 90);
  CHECK(kiln::detail::check_entry(o.entry, 90) == "");  // a cubin for sm_90 defining both kernels
}
