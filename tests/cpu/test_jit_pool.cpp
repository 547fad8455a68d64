// The JIT worker pool: parallel workers, retry after a killed worker, in-process fallback, clean shutdown, workers forked from a warm one.
#include <doctest/doctest.h>

#include "disk/entry.hpp"
#include "cache_test_util.hpp"
#include "base/cubin_elf.hpp"
#include "examples_catalog.hpp"
#include "fake_compile.hpp"
#include "jit/pool/pool.hpp"
#include "jit_test_util.hpp"
#include "jit/pch_family.hpp"
#include "jit/pool/fork.hpp"
#include "jit/pool/settings.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <fstream>
#include <future>
#include <iterator>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <thread>

using kiln::detail::CompileOutcome;
using kiln::detail::CompileRequest;
using kiln::detail::JitPool;
using kiln::detail::JitPoolOptions;
using kiln::test::sample_entry;
using kiln::test::sample_key;
using kiln::test::served_by;

namespace {

// The worker executables the pools start: this build's, unless the environment names others.
// scripts/sanitize.sh runs the concurrency tests under ThreadSanitizer with build/'s uninstrumented
// workers: TSan starts a thread of its own in every forked child, and a worker that runs two threads
// must not fork, so instrumented workers would never fork, and the forking paths would go untested.
std::filesystem::path worker_executable(const char* variable, const char* built) {
  const char* chosen = std::getenv(variable);
  return chosen != nullptr && *chosen != '\0' ? chosen : built;
}
std::filesystem::path fake_jitd() { return worker_executable("KILN_TEST_FAKE_JITD", KILN_TEST_FAKE_JITD); }
std::filesystem::path real_jitd() { return worker_executable("KILN_TEST_JITD", KILN_TEST_JITD); }

JitPoolOptions fake_pool(unsigned workers) {
  JitPoolOptions o;
  o.workers = workers;
  o.worker = fake_jitd();
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

// A request of one PCH family (the fake compiler ignores the PCH directory); `controls` become "fake:"
// lines of its source, so that they do not change its family as options would.
CompileRequest family_request(std::string unit, std::vector<std::string> controls = {}) {
  CompileRequest r = fake_request(std::move(unit));
  for (const auto& c : controls) r.source += "\n" + c;
  r.pch_dir = "/nonexistent/kiln-test-pch";
  return r;
}

std::string control(const char* mode, const std::filesystem::path& dir, std::size_t n) { return option(mode, dir, n); }

// Fields of /proc/<pid>/stat after the command: [0] state, [1] ppid, ..., [11] utime, [12] stime.
std::vector<std::string> proc_stat(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::size_t close = text.rfind(')');
  std::vector<std::string> fields;
  if (close == std::string::npos) return fields;
  std::istringstream rest(text.substr(close + 1));
  for (std::string f; rest >> f;) fields.push_back(f);
  return fields;
}

pid_t parent_of(pid_t pid) {
  const auto f = proc_stat(pid);
  return f.size() > 1 ? static_cast<pid_t>(std::stol(f[1])) : -1;
}

// Whether `pid` was forked by a zygote of `worker` (jit/worker/serve.hpp): its parent is a child of the worker.
bool forked_by_zygote_of(pid_t pid, pid_t worker) {
  const pid_t zygote = parent_of(pid);
  return zygote > 0 && zygote != worker && parent_of(zygote) == worker;
}

// The threads of a process, from /proc/<pid>/task.
std::size_t threads_of(pid_t pid) { return kiln::test::count_files("/proc/" + std::to_string(pid) + "/task"); }

// The processes whose parent is `pid`.
std::vector<pid_t> children_of(pid_t pid) {
  std::vector<pid_t> found;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    if (parent_of(static_cast<pid_t>(std::stol(name))) == pid) found.push_back(static_cast<pid_t>(std::stol(name)));
  }
  return found;
}

// Zombie processes whose parent is one of `parents`.
std::vector<pid_t> zombies_of(const std::set<pid_t>& parents) {
  std::vector<pid_t> found;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const auto f = proc_stat(static_cast<pid_t>(std::stol(name)));
    if (f.size() > 1 && f[0] == "Z" && parents.count(static_cast<pid_t>(std::stol(f[1]))) > 0)
      found.push_back(static_cast<pid_t>(std::stol(name)));
  }
  return found;
}

bool gone(pid_t pid) {
  // A zombie still answers kill(pid, 0); a reaped child is no longer ours to wait for.
  errno = 0;
  const bool no_process = ::kill(pid, 0) == -1 && errno == ESRCH;
  errno = 0;
  const bool not_a_child = ::waitpid(pid, nullptr, WNOHANG) == -1 && errno == ECHILD;
  return no_process && not_a_child;
}

// gone(), allowing a forked worker's parent the moment it takes to release it after its end is seen.
bool soon_gone(pid_t pid) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (!gone(pid) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  return gone(pid);
}

JitPoolOptions real_pool(unsigned workers) {
  JitPoolOptions o;
  o.workers = workers;
  o.worker = real_jitd();
  return o;
}

// The CUB example unit, with a PCH directory under `dir`: one PCH family.
CompileRequest cub_request(const std::filesystem::path& dir, std::string unit = "block_sum_f32") {
  CompileRequest r = kiln::test::example_request(kiln::test::example_unit("block_sum_f32"), 90);
  r.unit = std::move(unit);
  r.pch_dir = (dir / "pch").string();
  return r;
}

// The outcome, or nullopt when NVRTC or nvJitLink is not installed here (the test is then skipped).
std::optional<CompileOutcome> real_outcome(std::future<CompileOutcome>& f) {
  try {
    return f.get();
  } catch (const kiln::Error& e) {
    if (e.code() != kiln::Errc::no_compiler) throw;
    MESSAGE("skipped: NVRTC or nvJitLink is not installed here (" << e.what() << ")");
    return std::nullopt;
  }
}

// A request with gate.control() waits until the test calls gate.open(): so that a family's first
// request ends only once the test has queued the rest.
struct Gate {
  kiln::test::TempDir dir;
  std::string control() const { return "fake:wait=" + (dir.path() / "open").string(); }
  void open() const { std::ofstream(dir.path() / "open").put('x'); }
};

bool forks(const JitPool& pool) {
  if (!pool.forks_workers()) MESSAGE("skipped: no pidfds in this kernel, so no forking");
  return pool.forks_workers();
}

// Warms a family in a pool of n workers: a first request, then n that must run at once (each waits for
// all n); each with the `extra` controls too. Returns the pid of the worker that served the first, and
// those that served the n.
std::pair<pid_t, std::set<pid_t>> warm_family(JitPool& pool, std::size_t n, const std::vector<std::string>& extra = {}) {
  kiln::test::TempDir gather;
  const Gate gate;
  std::vector<std::string> controls_of_first = extra;
  controls_of_first.push_back(gate.control());
  auto first = pool.submit(family_request("first", controls_of_first));
  std::vector<std::string> controls;
  std::vector<std::future<CompileOutcome>> rest;
  for (std::size_t i = 0; i < n; ++i) {
    controls = extra;
    controls.push_back(control("gather", gather.path(), n));
    rest.push_back(pool.submit(family_request(numbered("g", i), controls)));
  }
  gate.open();
  const CompileOutcome f = first.get();
  REQUIRE_MESSAGE(f.entry.ok(), f.entry.error());
  CHECK(f.entry->cubin == family_request("first", controls_of_first).source);  // the fake's cubin is the source
  std::set<pid_t> pids;
  for (std::size_t i = 0; i < n; ++i) {
    const CompileOutcome o = rest[i].get();
    REQUIRE_MESSAGE(o.entry.ok(), o.entry.error());
    CHECK(o.entry->kernels.at(0).name == numbered("g", i) + "_k");  // its own request's answer
    pids.insert(static_cast<pid_t>(served_by(o)));
  }
  return {static_cast<pid_t>(served_by(f)), pids};
}

}  // namespace

// The concurrency suite: also run under ThreadSanitizer (scripts/sanitize.sh).
TEST_SUITE_BEGIN("concurrency");

TEST_CASE("KILN_JIT_WORKERS: a whole number from 1 to 256, else the default and one warning") {
  const unsigned fallback = kiln::detail::default_jit_workers();
  CHECK(fallback >= 1);
  CHECK(fallback <= 16);
  CHECK(*kiln::detail::jit_workers_from(nullptr) == fallback);
  CHECK(*kiln::detail::jit_workers_from("") == fallback);
  CHECK(*kiln::detail::jit_workers_from("5") == 5);
  CHECK(*kiln::detail::jit_workers_from("256") == 256);
  for (const char* bad : {"0", "-1", "4x", "abc", "257", " 4", "99999999999"}) {
    const auto workers = kiln::detail::jit_workers_from(bad);  // the pool then takes the default
    REQUIRE_FALSE(workers.ok());
    CHECK(workers.error().find(std::string("'") + bad + "'") != std::string::npos);
    CHECK(workers.error().find("using " + std::to_string(fallback) + " JIT workers") != std::string::npos);
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
    REQUIRE_MESSAGE(o.entry.ok(), o.entry.error());
    CHECK(o.entry->cubin == numbered("// the source of u", i));
    CHECK(o.entry->kernels.at(0).lowered == "_Zu" + std::to_string(i) + "v");
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
    REQUIRE(o.entry.ok());
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
  REQUIRE_MESSAGE(o.entry.ok(), o.entry.error());
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
  CHECK_FALSE(o.entry.ok());
  INFO(o.entry.error());
  CHECK(o.entry.error().find("tests/doomed for sm_90") != std::string::npos);
  CHECK(o.entry.error().find("died twice") != std::string::npos);
  CHECK(o.entry.error().find("pid " + std::to_string(first) + " killed by signal 9") != std::string::npos);
  CHECK(o.entry.error().find("pid " + std::to_string(second) + " killed by signal 9") != std::string::npos);

  const CompileOutcome next = pool.compile(fake_request("after"));
  REQUIRE_MESSAGE(next.entry.ok(), next.entry.error());
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
    REQUIRE(o.entry.ok());
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
  CHECK(pool2.compile(fake_request("env")).entry.ok());
  REQUIRE(pool2.warnings().size() == 1);
  CHECK(pool2.warnings()[0].find("KILN_JITD=/nonexistent/from-env is not an executable file") != std::string::npos);
}

TEST_CASE("a worker that does not speak the protocol: in-process fallback, and the child is reaped") {
  JitPoolOptions options = fake_pool(1);
  options.worker = "/bin/true";
  JitPool pool(options);
  const CompileOutcome o = pool.compile(fake_request("fallback"));
  REQUIRE(o.entry.ok());
  CHECK(served_by(o) == ::getpid());
  REQUIRE(pool.warnings().size() == 1);
  CHECK(pool.warnings()[0].find("/bin/true did not start") != std::string::npos);
  CHECK(pool.worker_pids().empty());
  CHECK(pool.compile(fake_request("again")).entry.ok());
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
    REQUIRE(a.get().entry.ok());
    REQUIRE(b.get().entry.ok());
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
    CHECK_FALSE(b.entry.ok());
    CHECK(b.entry.error().find("shut down while compiling unit tests/busy") != std::string::npos);
  }
  const CompileOutcome q = queued.get();
  CHECK_FALSE(q.entry.ok());
  CHECK(q.entry.error().find("shut down before compiling unit tests/queued") != std::string::npos);
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
  options.worker = real_jitd();
  JitPool pool(options);
  CompileOutcome o;
  try {
    o = pool.compile(r);
  } catch (const kiln::Error& e) {
    if (e.code() != kiln::Errc::no_compiler) throw;
    MESSAGE("skipped: NVRTC or nvJitLink is not installed here (" << e.what() << ")");
    return;
  }
  REQUIRE_MESSAGE(o.entry.ok(), o.entry.error() << "\n" << o.log);
  CHECK(pool.stats().spawned == 1);
  CHECK(pool.stats().in_process == 0);
  CHECK(o.entry->arch == 90);
  CHECK(kiln::detail::check_entry(*o.entry, 90).ok());  // a cubin for sm_90 defining both kernels
}

TEST_CASE("a PCH family: the same options, include directories and leading directives; comments do not count") {
  using kiln::detail::leading_directives;
  using kiln::detail::pch_family;
  CHECK(leading_directives("// unit a\n/* a block\n   comment */ #include <a.cuh>\n\n#define X \\\n  1\n"
                           "  #include \"b.h\"  // why\r\ntemplate __global__ void k<1>();\n#include <c>\n") ==
        "#include <a.cuh>\n#define X 1\n#include \"b.h\"\n");
  CHECK(leading_directives("int x;\n#include <a>\n").empty());

  CompileRequest a = fake_request("a", {"-std=c++17"});
  a.include_dirs = {"/inc"};
  a.pch_dir = "/pch";
  a.source = "// Generated for unit a\n#include <kiln/a.cuh>\n\ntemplate __global__ void k<int, 128>();\n";
  const std::string family = pch_family(a);
  CHECK(!family.empty());
  CompileRequest b = fake_request("b", {"-std=c++17"});
  b.include_dirs = a.include_dirs;
  b.pch_dir = a.pch_dir;
  b.source = "// Generated for unit b, longer\n#include <kiln/a.cuh>\ntemplate __global__ void k<float, 256>();\n";
  CHECK(pch_family(b) == family);  // other unit, kernels, template arguments: the same PCH

  const auto differs = [&](auto change) {
    CompileRequest c = a;
    change(c);
    return pch_family(c) != family;
  };
  CHECK(differs([](CompileRequest& c) { c.options.push_back("-DX=1"); }));
  CHECK(differs([](CompileRequest& c) { c.options = {"-std=c++20"}; }));
  CHECK(differs([](CompileRequest& c) { c.include_dirs.push_back("/more"); }));
  CHECK(differs([](CompileRequest& c) { c.arch = 80; }));
  CHECK(differs([](CompileRequest& c) { c.pch_dir = "/other"; }));
  CHECK(differs([](CompileRequest& c) { c.source = "#include <kiln/a.cuh>\n#include <more.cuh>\nint x;\n"; }));
  CHECK(differs([](CompileRequest& c) { c.options = {"-std=c++1", "7"}; }));  // fields cannot run together
  a.pch_dir.clear();
  CHECK(pch_family(a).empty());  // no PCH, no family
}

TEST_CASE("KILN_JIT_FORK: 0 turns forking off; unset, empty or 1 leave it on; anything else warns") {
  CHECK(*kiln::detail::jit_fork_from(nullptr));
  CHECK(*kiln::detail::jit_fork_from(""));
  CHECK(*kiln::detail::jit_fork_from("1"));
  CHECK_FALSE(*kiln::detail::jit_fork_from("0"));
  const auto no = kiln::detail::jit_fork_from("no");  // forking then stays on
  REQUIRE_FALSE(no.ok());
  CHECK(no.error().find("KILN_JIT_FORK='no'") != std::string::npos);

  kiln::test::ScopedEnv env("KILN_JIT_FORK", "0");
  JitPool off(fake_pool(1));
  CHECK_FALSE(off.forks_workers());
  JitPoolOptions asked = fake_pool(1);
  asked.fork = true;  // the option wins over the environment
  CHECK(JitPool(asked).forks_workers() == kiln::detail::forking_supported());
}

TEST_CASE("a family's backlog: one worker builds its PCH, the other workers are forked from that one") {
  JitPool pool(fake_pool(3));
  if (!forks(pool)) return;
  const auto [zygote, pids] = warm_family(pool, 3);
  CHECK(pids.size() == 3);
  CHECK(pids.count(zygote) == 1);
  for (const pid_t pid : pids)
    if (pid != zygote) CHECK(forked_by_zygote_of(pid, zygote));  // from the worker that built the PCH
  const auto stats = pool.stats();
  CHECK(stats.spawned == 1);
  CHECK(stats.forked == 2);
  CHECK(stats.fork_failures == 0);
  CHECK(pool.warnings().empty());

  // Requests without a PCH family are not held back, and a forked worker serves them like any other.
  const CompileOutcome plain = pool.compile(fake_request("plain"));
  REQUIRE(plain.entry.ok());
  CHECK(pids.count(static_cast<pid_t>(served_by(plain))) == 1);
}

TEST_CASE("a forked worker killed mid-request: the request is retried on a new forked worker, and the pool keeps serving") {
  JitPool pool(fake_pool(2));
  if (!forks(pool)) return;
  kiln::test::TempDir marks;
  const Gate gate;
  auto first = pool.submit(family_request("first", {gate.control()}));
  auto victim = pool.submit(family_request("victim", {control("hang", marks.path(), 1)}));
  gate.open();
  std::set<pid_t> seen;
  const pid_t forked = wait_for_mark(marks.path(), 1, seen);
  const CompileOutcome f = first.get();
  REQUIRE(f.entry.ok());
  const pid_t zygote = static_cast<pid_t>(served_by(f));
  CHECK(forked != zygote);
  CHECK(forked_by_zygote_of(forked, zygote));
  REQUIRE(::kill(forked, SIGKILL) == 0);

  const CompileOutcome o = victim.get();
  REQUIRE_MESSAGE(o.entry.ok(), o.entry.error());
  const pid_t retried_on = static_cast<pid_t>(served_by(o));
  CHECK(retried_on != forked);
  CHECK(retried_on != zygote);
  CHECK(forked_by_zygote_of(retried_on, zygote));  // forked again: the retry was warm too
  auto stats = pool.stats();
  CHECK(stats.deaths == 1);
  CHECK(stats.retried == 1);
  CHECK(stats.spawned == 1);
  CHECK(stats.forked == 2);
  CHECK(soon_gone(forked));

  for (std::size_t i = 0; i < 4; ++i) CHECK(pool.compile(family_request(numbered("after", i))).entry.ok());
  CHECK(pool.compile(fake_request("plain")).entry.ok());
  CHECK(pool.stats().deaths == 1);
}

TEST_CASE("shutting down with forked workers busy and idle leaves no process behind, zombie or not") {
  std::vector<pid_t> pids;
  std::future<CompileOutcome> busy1, busy2;
  kiln::test::TempDir marks;
  {
    JitPool pool(fake_pool(3));
    if (!forks(pool)) return;
    warm_family(pool, 3);
    REQUIRE(pool.stats().forked == 2);
    busy1 = pool.submit(family_request("busy1", {control("hang", marks.path(), 100)}));
    busy2 = pool.submit(family_request("busy2", {control("hang", marks.path(), 100)}));
    std::set<pid_t> seen;
    wait_for_mark(marks.path(), 1, seen);
    wait_for_mark(marks.path(), 2, seen);  // two workers hang, the third is idle
    pids = pool.worker_pids();
    REQUIRE(pids.size() == 3);
    std::set<pid_t> zygotes;  // those the forked workers were forked by
    for (const pid_t pid : pids)
      if (parent_of(pid) != ::getpid()) zygotes.insert(parent_of(pid));
    REQUIRE(zygotes.size() == 1);
    pids.insert(pids.end(), zygotes.begin(), zygotes.end());
  }
  for (const pid_t pid : pids) CHECK(soon_gone(pid));
  std::set<pid_t> parents(pids.begin(), pids.end());
  parents.insert(::getpid());
  CHECK(zombies_of(parents).empty());
  for (auto* busy : {&busy1, &busy2}) CHECK(busy->get().entry.error().find("shut down while compiling") != std::string::npos);
}

TEST_CASE("a worker that cannot fork (it runs a second thread): cold workers instead, and one warning") {
  JitPool pool(fake_pool(2));
  if (!forks(pool)) return;
  kiln::test::TempDir gather;
  const Gate gate;
  auto first = pool.submit(family_request("first", {"fake:thread", gate.control()}));
  auto a = pool.submit(family_request("a", {control("gather", gather.path(), 2)}));
  auto b = pool.submit(family_request("b", {control("gather", gather.path(), 2)}));
  gate.open();
  REQUIRE(first.get().entry.ok());
  const CompileOutcome oa = a.get(), ob = b.get();
  REQUIRE_MESSAGE(oa.entry.ok(), oa.entry.error());
  REQUIRE_MESSAGE(ob.entry.ok(), ob.entry.error());
  CHECK(served_by(oa) != served_by(ob));
  const auto stats = pool.stats();
  CHECK(stats.forked == 0);
  CHECK(stats.fork_failures == 1);
  CHECK(stats.spawned == 2);
  REQUIRE(pool.warnings().size() == 1);
  CHECK(pool.warnings()[0].find("runs 2 threads") != std::string::npos);
}

TEST_CASE("where linking starts a thread (the CUDA driver's), workers are still forked: by the zygote made before the first link") {
  std::optional<JitPool> holder(std::in_place, fake_pool(3));
  JitPool& pool = *holder;
  if (!forks(pool)) return;
  const auto [builder, pids] = warm_family(pool, 3, {"fake:thread-on-link"});
  CHECK(pids.size() == 3);
  CHECK(pids.count(builder) == 1);
  CHECK(threads_of(builder) >= 2);  // it linked (a thread per link here): it could not fork itself
  std::set<pid_t> zygotes;
  for (const pid_t pid : pids) {
    if (pid == builder) continue;
    CHECK(forked_by_zygote_of(pid, builder));
    zygotes.insert(parent_of(pid));
  }
  REQUIRE(zygotes.size() == 1);
  const pid_t zygote = *zygotes.begin();
  CHECK(threads_of(zygote) == 1);  // it never links
  const auto stats = pool.stats();
  CHECK(stats.spawned == 1);
  CHECK(stats.forked == 2);
  CHECK(stats.fork_failures == 0);
  CHECK(pool.warnings().empty());

  // A family new to a worker that runs two threads gets no zygote: nothing forks for it, it goes cold.
  auto other = [](std::string unit, std::vector<std::string> controls) {
    CompileRequest r = family_request(std::move(unit), std::move(controls));
    r.options = {"-DOTHER_FAMILY"};
    return r;
  };
  kiln::test::TempDir gather;
  const Gate gate;
  auto first = pool.submit(other("o_first", {"fake:thread-on-link", gate.control()}));
  std::vector<std::future<CompileOutcome>> rest;
  for (std::size_t i = 0; i < 3; ++i)
    rest.push_back(pool.submit(other(numbered("o", i), {"fake:thread-on-link", control("gather", gather.path(), 3)})));
  gate.open();
  REQUIRE(first.get().entry.ok());
  for (auto& r : rest) {
    const CompileOutcome o = r.get();
    REQUIRE_MESSAGE(o.entry.ok(), o.entry.error());
  }
  CHECK(pool.stats().forked == 2);  // no more

  std::vector<pid_t> all = pool.worker_pids();
  all.push_back(zygote);
  holder.reset();
  for (const pid_t pid : all) CHECK(soon_gone(pid));  // the zygote did not outlive its worker
}

TEST_CASE("a worker's zygote dies with it: a killed worker leaves no zygote behind") {
  JitPool pool(fake_pool(1));
  if (!forks(pool)) return;
  const CompileOutcome o = pool.compile(family_request("first", {"fake:thread-on-link"}));
  REQUIRE_MESSAGE(o.entry.ok(), o.entry.error());
  const pid_t worker = static_cast<pid_t>(served_by(o));
  const std::vector<pid_t> zygotes = children_of(worker);
  REQUIRE(zygotes.size() == 1);
  CHECK(threads_of(zygotes[0]) == 1);
  REQUIRE(::kill(worker, SIGKILL) == 0);
  CHECK(soon_gone(zygotes[0]));
  // The pool replaces the worker, and its zygote forks again.
  const CompileOutcome again = pool.compile(family_request("again", {"fake:thread-on-link"}));
  REQUIRE_MESSAGE(again.entry.ok(), again.entry.error());
  CHECK(served_by(again) != worker);
}

TEST_CASE("KILN_JIT_FORK=0: workers make no zygotes") {
  JitPoolOptions options = fake_pool(1);
  options.fork = false;
  JitPool pool(options);
  const CompileOutcome o = pool.compile(family_request("first"));
  REQUIRE_MESSAGE(o.entry.ok(), o.entry.error());
  CHECK(children_of(static_cast<pid_t>(served_by(o))).empty());
}

TEST_CASE("KILN_JIT_FORK=0: every worker of a family is started from the executable and builds its own PCH") {
  JitPoolOptions options = fake_pool(3);
  options.fork = false;
  JitPool pool(options);
  kiln::test::TempDir gather;
  std::vector<std::future<CompileOutcome>> all;
  for (std::size_t i = 0; i < 3; ++i)
    all.push_back(pool.submit(family_request(numbered("g", i), {control("gather", gather.path(), 3)})));
  for (auto& f : all) REQUIRE(f.get().entry.ok());
  CHECK(pool.stats().spawned == 3);
  CHECK(pool.stats().forked == 0);
}

TEST_CASE("the real kiln-jitd: a worker forked after the CUB family's PCH is built compiles warm, and its cubin matches") {
  std::optional<kiln::test::ScopedEnv> link_thread;
  SUBCASE("as on this host") {}
  SUBCASE("its links starting a thread, as the CUDA driver does where there is one: forked by the zygote") {
    link_thread.emplace("KILN_JITD_TEST_LINK_THREAD", "1");
  }
  kiln::test::TempDir temp;
  JitPool pool(real_pool(2));
  if (!forks(pool)) return;
  auto cold = pool.submit(cub_request(temp.path()));
  auto warm = pool.submit(cub_request(temp.path(), "block_sum_f32_again"));
  const auto a = real_outcome(cold);
  if (!a) return;
  const auto b = real_outcome(warm);
  REQUIRE_MESSAGE(a->entry.ok(), a->entry.error() << "\n" << a->log);
  REQUIRE_MESSAGE(b->entry.ok(), b->entry.error() << "\n" << b->log);
  const auto stats = pool.stats();
  std::string warnings;
  for (const auto& w : pool.warnings()) warnings += w + "\n";
  INFO("pool warnings: ", warnings);
  CHECK(stats.spawned == 1);
  CHECK(stats.forked == 1);
  CHECK(stats.fork_failures == 0);
  CHECK(pool.warnings().empty());
  std::size_t threaded = 0;
  for (const pid_t pid : pool.worker_pids()) threaded += threads_of(pid) > 1 ? 1 : 0;
  if (link_thread) {
    CHECK(threaded == 2);  // both linked, so both run the simulated driver thread
  } else {
    // NVRTC and nvJitLink would start the CUDA driver's threads where one is installed; kiln-jitd
    // hides it from them (kiln_jitd_no_driver.cpp).
    CHECK(threaded == 0);
  }
  // NVRTC in the forked worker used the PCH its parent built, and made the same kernels.
  CHECK(a->log.find("creating precompiled header") != std::string::npos);
  CHECK(b->log.find("using precompiled header") != std::string::npos);
  const auto ca = kiln::detail::read_cubin(a->entry->cubin), cb = kiln::detail::read_cubin(b->entry->cubin);
  REQUIRE(ca.ok());
  REQUIRE(cb.ok());
  CHECK(ca.kernels == cb.kernels);
  CHECK(cb.defines(a->entry->kernels.at(0).lowered));
  CHECK(b->entry->cubin == a->entry->cubin);
  MESSAGE("block_sum_f32 NVRTC: cold worker " << a->nvrtc_ms << " ms (builds the PCH); forked worker " << b->nvrtc_ms
                                              << " ms");
}

TEST_CASE("the real kiln-jitd killed mid-NVRTC compile of a CUB unit: retried once on a new worker, and the pool keeps serving") {
  kiln::test::TempDir temp;
  JitPool pool(real_pool(1));
  auto future = pool.submit(cub_request(temp.path()));
  // Wait for the worker, then for it to be well into NVRTC (CPU time spent), and kill it.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  pid_t victim = -1;
  for (; victim < 0 && std::chrono::steady_clock::now() < deadline; std::this_thread::sleep_for(std::chrono::milliseconds(2)))
    if (const auto pids = pool.worker_pids(); !pids.empty()) victim = pids.front();
  REQUIRE(victim > 0);
  for (;; std::this_thread::sleep_for(std::chrono::milliseconds(5))) {
    const auto f = proc_stat(victim);
    REQUIRE(f.size() > 12);
    if (std::stol(f[11]) + std::stol(f[12]) >= 30) break;  // 0.3 s of CPU at 100 ticks/s: inside NVRTC
    REQUIRE(std::chrono::steady_clock::now() < deadline);
  }
  if (future.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
    const auto early = real_outcome(future);
    if (!early) return;  // no NVRTC: the worker answered at once
    FAIL("the compile ended before the worker could be killed");
  }
  REQUIRE(::kill(victim, SIGKILL) == 0);
  const auto o = real_outcome(future);
  if (!o) return;
  REQUIRE_MESSAGE(o->entry.ok(), o->entry.error() << "\n" << o->log);
  CHECK(kiln::detail::check_entry(*o->entry, 90).ok());
  const auto stats = pool.stats();
  CHECK(stats.deaths == 1);
  CHECK(stats.retried == 1);
  CHECK(stats.spawned == 2);
  CHECK(gone(victim));
  const auto pids = pool.worker_pids();
  REQUIRE(pids.size() == 1);
  CHECK(pids.front() != victim);

  // The pool keeps serving, on the retried worker: the family's PCH is warm in it now.
  auto again = pool.submit(cub_request(temp.path(), "block_sum_f32_again"));
  const auto next = real_outcome(again);
  REQUIRE(next);
  REQUIRE_MESSAGE(next->entry.ok(), next->entry.error());
  CHECK(next->log.find("using precompiled header") != std::string::npos);
  CHECK(pool.stats().deaths == 1);
}

TEST_CASE("JIT processes killed at random points (workers and their zygotes and forked workers): each request succeeds or fails clearly; the pool keeps serving; the cache stays consistent") {
  kiln::test::TempDir tmp;
  kiln::DiskCache cache(kiln::test::config_at(tmp.path()));
  constexpr int kClients = 6, kPerClient = 20;
  std::mutex mutex;  // guards what follows
  std::set<pid_t> seen;  // every process of the pool's that the killer saw
  std::vector<std::string> unexpected;
  int compiled = 0, failed = 0, killed = 0;
  {
    JitPool pool(fake_pool(3));
    std::atomic<bool> stop{false};
    std::thread killer([&] {
      std::mt19937 rng(20261123);
      while (!stop) {
        std::this_thread::sleep_for(std::chrono::milliseconds(3 + rng() % 20));
        std::vector<pid_t> victims = pool.worker_pids();
        for (const pid_t w : pool.worker_pids())
          for (const pid_t c : children_of(w)) victims.push_back(c);  // its zygotes, and what they forked
        if (victims.empty()) continue;
        const std::lock_guard lock(mutex);
        seen.insert(victims.begin(), victims.end());
        const pid_t victim = victims[rng() % victims.size()];
        // Only one of the pool's own: a pid from the snapshot above may have ended and been reused since.
        const pid_t parent = parent_of(victim);
        if (parent != ::getpid() && seen.count(parent) == 0) continue;
        killed += ::kill(victim, SIGKILL) == 0;
      }
    });
    std::vector<std::thread> clients;
    for (int t = 0; t < kClients; ++t)
      clients.emplace_back([&, t] {
        std::mt19937 rng(static_cast<unsigned>(t));
        for (int i = 0; i < kPerClient; ++i) {
          const int key = t * kPerClient + i;
          const std::string sleep = "fake:sleep=" + std::to_string(rng() % 30);
          try {
            const auto entry = cache.get_or_build(sample_key(key), [&] {
              // Half of them one PCH family (so zygotes and forked workers), half plain.
              const CompileOutcome o = pool.compile(key % 2 ? family_request(numbered("k", key), {sleep})
                                                            : fake_request(numbered("k", key), {sleep}));
              if (!o.entry.ok()) throw kiln::Error(kiln::Errc::compile, o.entry.error());
              return sample_entry(key);
            });
            const std::lock_guard lock(mutex);
            compiled += kiln::test::same_entry(entry, sample_entry(key));
          } catch (const std::exception& e) {
            const std::lock_guard lock(mutex);
            // Allowed only as the pool's clear error for a request whose worker was killed and whose
            // retry was killed too: mid-request ("its worker died twice") or while starting ("its worker
            // died (...) and no new one could be started: ... killed by signal 9").
            ++failed;
            if (std::string_view(e.what()).find("its worker died") == std::string_view::npos)
              unexpected.emplace_back(e.what());
          }
        }
      });
    for (auto& c : clients) c.join();
    stop = true;
    killer.join();

    // Afterwards every request is served, of a family or not.
    for (std::size_t i = 0; i < 4; ++i) CHECK(pool.compile(family_request(numbered("after", i))).entry.ok());
    CHECK(pool.compile(fake_request("after_plain")).entry.ok());
    const auto stats = pool.stats();
    MESSAGE(killed << " kills: " << compiled << " requests compiled and cached, " << failed
                   << " failed clearly (their retry was killed too); pool: " << stats.deaths << " deaths, " << stats.retried
                   << " retried, " << stats.spawned << " workers started, " << stats.forked << " forked");
    const std::lock_guard lock(mutex);
    for (const pid_t w : pool.worker_pids()) {
      seen.insert(w);
      for (const pid_t c : children_of(w)) seen.insert(c);
    }
  }
  for (const auto& e : unexpected) FAIL_CHECK("unexpected error: " << e);
  CHECK(killed > 0);
  CHECK(compiled + failed == kClients * kPerClient);
  CHECK(compiled > failed);
  // Nothing of the pool's runs on. (A process whose parent was killed is init's to reap: ended suffices.)
  for (const pid_t pid : seen) {
    CAPTURE(pid);
    CHECK((soon_gone(pid) || proc_stat(pid).empty() || proc_stat(pid)[0] == "Z"));
  }
  CHECK(zombies_of({::getpid()}).empty());
  const kiln::VerifyReport report = cache.verify();
  CHECK(report.problems.empty());
  CHECK(report.checked == static_cast<std::uint64_t>(compiled));
  CHECK(kiln::test::temp_and_lock_files(kiln::test::entries_dir(tmp.path())).empty());
}

TEST_SUITE_END();
