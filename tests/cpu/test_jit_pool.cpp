// The JIT worker pool: parallel workers, retry after a killed or silent worker, in-process fallback, clean
// shutdown, and precompiled headers built, published, verified and used across processes.
#include <kiln/cache.hpp>
#include <kiln/catalog.hpp>
#include <doctest/doctest.h>

#include "cache_test_util.hpp"
#include "base/cubin_elf.hpp"
#include "base/summed_file.hpp"
#include "chain/entry.hpp"
#include "examples_catalog.hpp"
#include "fake_compile.hpp"
#include "jit/pch_store.hpp"
#include "jit/pool/host_pch.hpp"
#include "jit/pool/machine_slots.hpp"
#include "jit/pool/pool.hpp"
#include "jit/pool/settings.hpp"
#include "jit/pool/worker_process.hpp"
#include "jit/protocol.hpp"  // kHostPidVariable
#include "jit/worker/serve.hpp"  // kWorkerMemoryLimited
#include "jit_test_util.hpp"

#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <fstream>
#include <future>
#include <iterator>
#include <limits>
#include <map>
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
using kiln::test::eventually;
using kiln::test::sample_entry;
using kiln::test::sample_key;
using kiln::test::compiled_in;

namespace {

// The worker executables the pools start: this build's, unless the environment names others
// (scripts/sanitize.sh runs the concurrency tests under ThreadSanitizer with build/'s uninstrumented
// workers: what TSan checks is the host side).
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


// A request of one PCH family; `controls` become "fake:" lines of its source, so that they do not change
// its family as options would.
CompileRequest family_request(std::string unit, std::vector<std::string> controls = {}) {
  CompileRequest r = fake_request(std::move(unit));
  for (const auto& c : controls) r.source += "\n" + c;
  return r;
}

// The family's PCH file, in `dir`.
kiln::detail::PchFamily family(const std::filesystem::path& dir) { return {"a-family", dir / "a-family.pch"}; }

// A fake PCH file and its sum, as a worker publishes them.
void plant_pch(const std::filesystem::path& path, std::string_view content) {
  const std::filesystem::path temp = path.string() + ".tmp";
  std::ofstream(temp, std::ios::binary) << content;
  REQUIRE(kiln::detail::publish_pch(temp, path).ok());
}

// Fields of /proc/<pid>/stat after the command: [0] state, [1] ppid, ..., [11] utime, [12] stime; none
// for a process that is gone. Reading the file of one that ends meanwhile fails with ESRCH, which
// libstdc++'s filebuf throws as std::ios_base::failure (it aborted the kill test once, in CI's ASan build).
std::vector<std::string> proc_stat(pid_t pid) {
  std::string text;
  try {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  } catch (const std::ios_base::failure&) {
    return {};
  }
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

// gone(), allowing the moment a killed worker takes to be reaped.
bool soon_gone(pid_t pid) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (!gone(pid) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  return gone(pid);
}

// The trace's request line of `unit` (as the pool names it, "tests/<unit>"); empty when there is none.
std::string trace_line(const std::filesystem::path& trace, const std::string& unit) {
  std::ifstream in(trace);
  for (std::string line; std::getline(in, line);)
    if (line.find("\"unit\":\"" + unit + "\"") != std::string::npos) return line;
  return {};
}

// A number or flag of a trace line ("true" is 1): NaN when the line has no such field.
double trace_field(const std::string& line, const std::string& field) {
  const std::size_t at = line.find("\"" + field + "\":");
  if (at == std::string::npos) return std::numeric_limits<double>::quiet_NaN();
  const std::string value = line.substr(at + field.size() + 3);
  if (value.starts_with("true")) return 1;
  if (value.starts_with("false")) return 0;
  return std::stod(value);
}

// This process's memory files named `name` (the host's unpacked PCH copies are "kiln-pch").
std::size_t memory_files_named(const std::string& name) {
  std::size_t n = 0;
  for (const auto& fd : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    const auto target = std::filesystem::read_symlink(fd.path(), ec);
    if (!ec && target.string().starts_with("/memfd:" + name + " ")) ++n;
  }
  return n;
}

JitPoolOptions real_pool(unsigned workers) {
  JitPoolOptions o;
  o.workers = workers;
  o.worker = real_jitd();
  return o;
}

// The CUB example unit, as the JIT tier asks for it; and its PCH family, with the file in `dir`.
CompileRequest cub_request(std::string unit = "block_sum_f32") {
  CompileRequest r = kiln::test::example_request(kiln::test::example_unit("block_sum_f32"), 90);
  r.unit = std::move(unit);
  return r;
}
kiln::detail::PchFamily cub_family(const std::filesystem::path& dir) {
  const std::string key = kiln::detail::pch_family(cub_request(), kiln::examples::catalog().header_bundle_digest,
                                                   kiln::detail::worker_glibc_tunables());
  REQUIRE_FALSE(key.empty());
  return {key, kiln::detail::pch_path(dir, key)};
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

TEST_CASE("workers run with glibc's malloc on huge pages: GLIBC_TUNABLES gains glibc.malloc.hugetlb=1, the host's own tunables kept") {
  using kiln::detail::worker_glibc_tunables;
  CHECK(worker_glibc_tunables(nullptr) == "glibc.malloc.hugetlb=1");
  CHECK(worker_glibc_tunables("") == "glibc.malloc.hugetlb=1");
  CHECK(worker_glibc_tunables("glibc.malloc.arena_max=2") == "glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1");
  // The host's own choice wins, wherever it stands.
  CHECK(worker_glibc_tunables("glibc.malloc.hugetlb=0") == "glibc.malloc.hugetlb=0");
  CHECK(worker_glibc_tunables("glibc.malloc.arena_max=2:glibc.malloc.hugetlb=0") ==
        "glibc.malloc.arena_max=2:glibc.malloc.hugetlb=0");
  CHECK(worker_glibc_tunables("glibc.malloc.hugetlb_x=1") == "glibc.malloc.hugetlb_x=1:glibc.malloc.hugetlb=1");

  const char* host[] = {"A=1", "GLIBC_TUNABLES=glibc.malloc.arena_max=2", "B=2", nullptr};
  CHECK(kiln::detail::worker_environment(host) ==
        std::vector<std::string>{"A=1", "B=2", "GLIBC_TUNABLES=glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1"});

  // A worker started by the pool runs with them (glibc reads them as it starts; what /proc/<pid>/environ
  // shows, glibc 2.36 rewrote).
  for (const auto& [host_value, worker_value] :
       {std::pair<std::optional<std::string>, std::string>{std::nullopt, "glibc.malloc.hugetlb=1"},
        {"glibc.malloc.arena_max=2", "glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1"},
        {"glibc.malloc.hugetlb=0", "glibc.malloc.hugetlb=0"}}) {
    CAPTURE(host_value.value_or("(unset)"));
    kiln::test::ScopedEnv env("GLIBC_TUNABLES", host_value);
    JitPool pool(fake_pool(1));
    const CompileOutcome o = pool.compile(fake_request("u", {"fake:env=GLIBC_TUNABLES"}));
    REQUIRE(o.entry.ok());
    CHECK(compiled_in(o) != ::getpid());
    CHECK(o.log.ends_with("\nenv=" + worker_value));
  }

  // NVRTC refuses a PCH written under another heap layout: the tunables are part of a family's key.
  const std::string_view digest = kiln::examples::catalog().header_bundle_digest;
  CHECK(kiln::detail::pch_family(cub_request(), digest, "glibc.malloc.hugetlb=1") !=
        kiln::detail::pch_family(cub_request(), digest, "glibc.malloc.hugetlb=0"));
}

TEST_CASE("the worker is found next to libkiln in the build tree, or where KILN_JITD says") {
  {
    kiln::test::ScopedEnv env("KILN_JITD", std::nullopt);
    CHECK(kiln::detail::find_jit_worker() == std::filesystem::canonical(KILN_TEST_JITD));
    const auto places = kiln::detail::jit_worker_candidates();
    REQUIRE(places.size() == 3);
    // The install location, relative to libkiln's directory (a moved install tree) and as configured.
    for (const auto& place : {places[1], places[2]}) {
      CHECK(place.filename() == "kiln-jitd");
      CHECK(place.parent_path().filename() == "kiln");
    }
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
    CHECK(compiled_in(o) != ::getpid());
    pids.insert(compiled_in(o));
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
    CHECK(pids.count(compiled_in(o)) == 1);
  }
  CHECK(pool.stats().spawned == n);
}

TEST_CASE("start_ahead starts one worker before any request, which the first request then finds; never a second") {
  {
    JitPool pool(fake_pool(4));
    pool.start_ahead();
    pool.start_ahead();  // the pool has started one: nothing more
    REQUIRE(eventually([&] { return pool.worker_pids().size() == 1; }));
    const pid_t ahead = pool.worker_pids().front();
    CHECK(pool.stats().started_ahead == 1);
    const CompileOutcome o = pool.compile(fake_request("u"));
    REQUIRE(o.entry.ok());
    CHECK(compiled_in(o) == ahead);
    CHECK(pool.stats().spawned == 1);
  }
  {
    // A request right behind it, before the worker's hello, waits for that worker rather than start another.
    JitPool pool(fake_pool(4));
    pool.start_ahead();
    const CompileOutcome o = pool.compile(fake_request("v"));
    REQUIRE(o.entry.ok());
    CHECK(pool.stats().spawned == 1);
    CHECK(pool.worker_pids().size() == 1);
  }
  {
    // Warmed up for an architecture: it compiled a kernel of one line, so it is no longer fresh, and a
    // request that reads a PCH file (which NVRTC refuses a used worker) gets a new one.
    kiln::test::TempDir dir;
    plant_pch(family(dir.path()).path, kiln::test::kFakePch);
    JitPool pool(fake_pool(4));
    pool.start_ahead(90);
    REQUIRE(eventually([&] { return pool.stats().warmed_up == 1; }));
    const pid_t warmed = pool.worker_pids().front();
    const CompileOutcome o = pool.compile(family_request("w"), family(dir.path()));
    REQUIRE(o.entry.ok());
    CHECK(o.pch == kiln::detail::PchResult::used);
    CHECK(compiled_in(o) != warmed);
    CHECK(pool.stats().spawned == 2);
  }
  {
    // Without a worker executable there is nothing to start: requests compile in this process as before.
    JitPoolOptions o = fake_pool(2);
    o.worker = "/nonexistent/kiln-jitd";
    JitPool pool(o);
    pool.start_ahead();
    CHECK(pool.stats().started_ahead == 0);
    CHECK(pool.worker_pids().empty());
  }
}

namespace {

// The "slot_wait" of the trace's request lines for `unit` (REGISTRY/UNIT) by `worker` (-1: any).
std::vector<double> slot_waits(const std::filesystem::path& trace, const std::string& unit, long worker = -1) {
  std::vector<double> waits;
  std::ifstream in(trace);
  for (std::string line; std::getline(in, line);) {
    if (line.find("\"unit\":\"" + unit + "\"") == std::string::npos) continue;
    if (worker >= 0 && line.find("\"worker\":" + std::to_string(worker) + ",") == std::string::npos) continue;
    const std::size_t at = line.find("\"slot_wait\":");
    REQUIRE_MESSAGE(at != std::string::npos, line);
    waits.push_back(std::stod(line.substr(at + 12)));
  }
  return waits;
}

// `o` under a machine-wide budget of one slot, in `dir`.
JitPoolOptions one_slot(JitPoolOptions o, const std::filesystem::path& dir) {
  o.budget_dir = dir;
  o.machine_slots = 1;
  return o;
}

}  // namespace

TEST_CASE("a worker's warm-up and a compile in this process each take a slot of the machine-wide budget") {
  // Both compiled beside the budget: with every slot held elsewhere they went at once.
  kiln::test::TempDir dir;
  const auto trace = dir.path() / "trace.jsonl";
  kiln::test::ScopedEnv env("KILN_JIT_TRACE", trace.c_str());
  kiln::detail::MachineSlots elsewhere(dir.path() / "cache", 1);  // another process's, as flock sees it
  const auto hold = std::chrono::milliseconds(300);
  {
    JitPool pool(one_slot(fake_pool(1), dir.path() / "cache"));
    kiln::detail::MachineSlots::Held held = elsewhere.acquire(std::chrono::seconds(10));
    REQUIRE(held.holds());
    pool.start_ahead(90);
    // The trace's spawn line comes with the worker's hello, right before the warm-up asks for its slot.
    REQUIRE(eventually([&] { return kiln::test::read_text(trace).find("\"event\":\"spawn\"") != std::string::npos; }));
    std::this_thread::sleep_for(hold);
    CHECK(pool.stats().warmed_up == 0);  // its worker waits for the slot
    held.release();
    REQUIRE(eventually([&] { return pool.stats().warmed_up == 1; }));
    CHECK(pool.stats().budget_waits == 1);
  }
  const auto warm_ups = slot_waits(trace, "kiln/warm-up");
  REQUIRE(warm_ups.size() == 1);
  CHECK(warm_ups[0] >= 0.5 * hold.count());
  {
    JitPoolOptions o = fake_pool(1);
    o.worker = "/nonexistent/kiln-jitd";
    JitPool pool(one_slot(o, dir.path() / "cache"));
    kiln::detail::MachineSlots::Held held = elsewhere.acquire(std::chrono::seconds(10));
    REQUIRE(held.holds());
    auto compiled = pool.submit(fake_request("here"));
    CHECK(compiled.wait_for(hold) == std::future_status::timeout);
    held.release();
    REQUIRE(compiled.wait_for(std::chrono::seconds(30)) == std::future_status::ready);
    const CompileOutcome outcome = compiled.get();
    REQUIRE(outcome.entry.ok());
    CHECK(compiled_in(outcome) == ::getpid());
    CHECK(pool.stats().in_process == 1);
    CHECK(pool.stats().budget_waits == 1);
  }
  const auto here = slot_waits(trace, "tests/here", 0);
  REQUIRE(here.size() == 1);
  CHECK(here[0] >= 0.5 * hold.count());
}

TEST_CASE("a warm-up waiting for a slot of the budget gives way to a request that comes meanwhile") {
  kiln::test::TempDir dir;
  const auto trace = dir.path() / "trace.jsonl";
  kiln::test::ScopedEnv env("KILN_JIT_TRACE", trace.c_str());
  kiln::detail::MachineSlots elsewhere(dir.path() / "cache", 1);
  JitPool pool(one_slot(fake_pool(1), dir.path() / "cache"));
  kiln::detail::MachineSlots::Held held = elsewhere.acquire(std::chrono::seconds(10));
  REQUIRE(held.holds());
  pool.start_ahead(90);
  // The trace's spawn line comes with the worker's hello, right before the warm-up asks for its slot.
  REQUIRE(eventually([&] { return kiln::test::read_text(trace).find("\"event\":\"spawn\"") != std::string::npos; }));
  const pid_t ahead = pool.worker_pids().front();
  auto compiled = pool.submit(fake_request("first"));
  // The slot is held until the warm-up has given way, however slowly its thread runs: it can only find
  // the request queued and no slot free.
  REQUIRE(eventually([&] { return pool.stats().warm_ups_left_out == 1; }));
  held.release();
  const CompileOutcome outcome = compiled.get();
  REQUIRE(outcome.entry.ok());
  CHECK(compiled_in(outcome) == ahead);  // the worker started ahead serves it, unwarmed
  CHECK(pool.stats().warmed_up == 0);
  CHECK(pool.stats().spawned == 1);
}

TEST_CASE("KILN_JIT_TRACE: one JSON line per worker started and per request answered, with its worker and times") {
  kiln::test::TempDir dir;
  const auto path = dir.path() / "trace.jsonl";
  {
    kiln::test::ScopedEnv env("KILN_JIT_TRACE", path.c_str());
    JitPool pool(fake_pool(2));
    std::vector<std::future<CompileOutcome>> futures;
    for (std::size_t i = 0; i < 3; ++i) futures.push_back(pool.submit(fake_request(numbered("t", i)), {}, 100.0 + i));
    for (auto& f : futures) REQUIRE(f.get().entry.ok());
    CHECK(pool.warnings().empty());
  }
  std::ifstream in(path);
  std::vector<std::string> spawns, requests;
  for (std::string line; std::getline(in, line);) {
    CHECK(line.front() == '{');
    CHECK(line.back() == '}');
    (line.find("\"event\":\"spawn\"") != std::string::npos ? spawns : requests).push_back(line);
  }
  CHECK(spawns.size() >= 1);
  CHECK(spawns.size() <= 2);
  REQUIRE(requests.size() == 3);
  for (std::size_t i = 0; i < 3; ++i) {
    const std::string unit = "\"unit\":\"tests/" + numbered("t", i) + "\"";
    CHECK(std::count_if(requests.begin(), requests.end(), [&](const std::string& r) { return r.find(unit) != std::string::npos; }) == 1);
  }
  for (const auto& r : requests) {
    CHECK(r.find("\"sm\":90") != std::string::npos);
    CHECK(r.find("\"pch\":\"none\"") != std::string::npos);
    CHECK(r.find("\"worker\":0,") == std::string::npos);  // a worker's pid, not this process's compile
  }
  // A FIFO: refused at once (an open for writing would wait for a reader), one warning, no trace.
  {
    const auto fifo = dir.path() / "trace.fifo";
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    const int status = kiln::test::run_in_child([&] {
      ::alarm(20);  // a pool that blocks in open() fails here instead of hanging the suite
      kiln::test::ScopedEnv env("KILN_JIT_TRACE", fifo.c_str());
      JitPool pool(fake_pool(1));
      if (!pool.compile(fake_request("u")).entry.ok()) return 1;
      const auto w = pool.warnings();
      return w.size() == 1 && w.front().find("not a regular file") != std::string::npos ? 0 : 2;
    });
    CHECK(status == 0);
  }
  // A file that cannot be opened: one warning, and the pool works without a trace.
  kiln::test::ScopedEnv env("KILN_JIT_TRACE", (dir.path() / "no" / "such" / "dir" / "t.jsonl").c_str());
  JitPool pool(fake_pool(1));
  CHECK(pool.compile(fake_request("u")).entry.ok());
  REQUIRE(pool.warnings().size() == 1);
  CHECK(pool.warnings().front().find("KILN_JIT_TRACE") != std::string::npos);
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
  CHECK(compiled_in(o) != first);
  CHECK(compiled_in(o) != ::getpid());
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
  CHECK(compiled_in(next) != first);
  CHECK(compiled_in(next) != second);
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
    CHECK(std::string(e.what()) == "fake: thrown in " + std::to_string(compiled_in(before)));
  }
  const CompileOutcome after = pool.compile(fake_request("c"));
  CHECK(compiled_in(after) == compiled_in(before));  // the worker survived it
  CHECK(pool.stats().deaths == 0);
}

TEST_CASE("no worker executable: requests compile in this process, with one warning that says how to fix it") {
  JitPoolOptions options = fake_pool(2);
  options.worker = "/nonexistent/kiln-jitd";
  JitPool pool(options);
  for (std::size_t i = 0; i < 3; ++i) {
    const CompileOutcome o = pool.compile(fake_request(numbered("here", i)));
    REQUIRE(o.entry.ok());
    CHECK(compiled_in(o) == ::getpid());
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
  CHECK(compiled_in(o) == ::getpid());
  REQUIRE(pool.warnings().size() == 1);
  CHECK(pool.warnings()[0].find("/bin/true did not start") != std::string::npos);
  CHECK(pool.worker_pids().empty());
  CHECK(pool.compile(fake_request("again")).entry.ok());
  CHECK(pool.stats().spawned == 1);  // not tried again: it never worked
}

TEST_CASE("the wait for a started worker's hello follows KILN_JIT_TIMEOUT: a worker that never says hello is given up within it") {
  // It was a fixed 30 s whatever the timeout said.
  kiln::test::TempDir dir;
  const auto silent = dir.path() / "silent-jitd";
  std::ofstream(silent) << "#!/bin/sh\nexec sleep 60\n";
  std::filesystem::permissions(silent, std::filesystem::perms::owner_all);
  JitPoolOptions options = fake_pool(1);
  options.worker = silent;
  options.timeout = std::chrono::milliseconds(1000);
  JitPool pool(options);
  const auto start = std::chrono::steady_clock::now();
  const CompileOutcome o = pool.compile(fake_request("unheard"));
  const auto took = std::chrono::steady_clock::now() - start;
  REQUIRE(o.entry.ok());
  CHECK(compiled_in(o) == ::getpid());  // in this process, with one warning
  CHECK(took < std::chrono::seconds(10));
  REQUIRE(pool.warnings().size() == 1);
  CHECK(pool.warnings()[0].find("did not start") != std::string::npos);
  CHECK(pool.worker_pids().empty());
}

namespace {

// This process's threads: id -> how often each gave up the CPU by itself (voluntary context switches).
std::map<long, long> voluntary_switches() {
  std::map<long, long> out;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc/self/task", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    std::ifstream status(it->path() / "status");
    for (std::string line; std::getline(status, line);)
      if (line.starts_with("voluntary_ctxt_switches:")) out[std::stol(it->path().filename())] = std::stol(line.substr(24));
  }
  return out;
}

}  // namespace

TEST_CASE("an idle pool's threads sleep until a request comes: they do not wake on a timer while nothing is queued") {
  const auto before = voluntary_switches();
  kiln::test::TempDir marks;
  JitPool pool(fake_pool(4));
  std::vector<std::future<CompileOutcome>> futures;
  for (std::size_t i = 0; i < 4; ++i)
    futures.push_back(pool.submit(fake_request(numbered("u", i), {option("gather", marks.path(), 4)})));
  for (auto& f : futures) REQUIRE(f.get().entry.ok());
  // The pool's threads: those that were not there before it.
  auto threads = voluntary_switches();
  std::erase_if(threads, [&](const auto& t) { return before.count(t.first) != 0; });
  REQUIRE(threads.size() >= 4);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the last answers' bookkeeping
  const auto idle_from = voluntary_switches();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const auto idle_to = voluntary_switches();
  long woke = 0;
  for (const auto& [tid, count] : threads)
    if (idle_from.count(tid) && idle_to.count(tid)) woke += idle_to.at(tid) - idle_from.at(tid);
  // Polling every 25 ms, four threads woke ~80 times in half a second.
  CHECK(woke <= 4);
  // And a request still finds them.
  CHECK(pool.compile(fake_request("after")).entry.ok());
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

TEST_CASE("KILN_JIT_TIMEOUT and KILN_JIT_PCH: whole seconds, 0 or 1; anything else the default and one warning") {
  CHECK(*kiln::detail::jit_timeout_from(nullptr) == std::chrono::milliseconds(kiln::detail::kDefaultJitTimeout));
  CHECK(*kiln::detail::jit_timeout_from("") == std::chrono::milliseconds(kiln::detail::kDefaultJitTimeout));
  CHECK(*kiln::detail::jit_timeout_from("90") == std::chrono::seconds(90));
  for (const char* bad : {"0", "-1", "1.5", "ten", "86401"}) {
    const auto timeout = kiln::detail::jit_timeout_from(bad);
    REQUIRE_FALSE(timeout.ok());
    CHECK(timeout.error().find(std::string("KILN_JIT_TIMEOUT='") + bad + "'") != std::string::npos);
  }
  CHECK(*kiln::detail::jit_pch_from(nullptr));
  CHECK(*kiln::detail::jit_pch_from("1"));
  CHECK_FALSE(*kiln::detail::jit_pch_from("0"));
  CHECK_FALSE(*kiln::detail::jit_pch_from("off"));
  CHECK_FALSE(*kiln::detail::jit_pch_from("no"));
  const auto maybe = kiln::detail::jit_pch_from("maybe");  // PCH files then stay on
  REQUIRE_FALSE(maybe.ok());
  CHECK(maybe.error().find("KILN_JIT_PCH='maybe' is neither on nor off (on, 1, true, yes / off, 0, false, no)") !=
        std::string::npos);

  kiln::test::ScopedEnv env("KILN_JIT_PCH", "0");
  JitPool off(fake_pool(1));
  CHECK_FALSE(off.uses_pch_files());
}

TEST_CASE("a worker that stops answering (SIGSTOP) is killed after the timeout, and the request retried") {
  kiln::test::TempDir marks;
  JitPoolOptions options = fake_pool(1);
  options.timeout = std::chrono::seconds(1);
  JitPool pool(options);
  auto future = pool.submit(fake_request("stopped", {option("hang", marks.path(), 1)}));
  std::set<pid_t> seen;
  const pid_t first = wait_for_mark(marks.path(), 1, seen);
  REQUIRE(::kill(first, SIGSTOP) == 0);  // it never answers, and never dies by itself
  const CompileOutcome o = future.get();
  REQUIRE_MESSAGE(o.entry.ok(), o.entry.error());
  CHECK(compiled_in(o) != first);
  const auto stats = pool.stats();
  CHECK(stats.timeouts == 1);
  CHECK(stats.retried == 1);
  CHECK(gone(first));
}

TEST_CASE("a worker that never answers twice: a clear error naming the unit and KILN_JIT_TIMEOUT; the pool keeps serving") {
  kiln::test::TempDir marks;
  JitPoolOptions options = fake_pool(1);
  options.timeout = std::chrono::seconds(1);
  JitPool pool(options);
  const CompileOutcome o = pool.compile(fake_request("silent", {option("hang", marks.path(), 2)}));
  CHECK_FALSE(o.entry.ok());
  INFO(o.entry.error());
  CHECK(o.entry.error().find("tests/silent for sm_90") != std::string::npos);
  CHECK(o.entry.error().find("no answer within 1 s (KILN_JIT_TIMEOUT)") != std::string::npos);
  // Killed for want of an answer, twice: not a worker that died by itself.
  CHECK(o.entry.error().find("gave no answer within 1 s (KILN_JIT_TIMEOUT), twice") != std::string::npos);
  CHECK(o.entry.error().find("died twice") == std::string::npos);
  CHECK(pool.stats().timeouts == 2);
  CHECK(pool.compile(fake_request("after")).entry.ok());
}

TEST_CASE("a family with more requests than workers: one request builds the PCH, later ones use it; the file is published with its sum") {
  kiln::test::TempDir dir;
  JitPool pool(fake_pool(2));
  std::vector<std::future<CompileOutcome>> futures;
  for (std::size_t i = 0; i < 8; ++i)
    futures.push_back(pool.submit(family_request(numbered("f", i), {"fake:sleep=150"}), family(dir.path())));
  for (auto& f : futures) REQUIRE(f.get().entry.ok());
  const auto stats = pool.stats();
  CHECK(stats.pch_created == 1);
  CHECK(stats.pch_used >= 1);
  CHECK(stats.pch_rejected == 0);
  CHECK(kiln::detail::verify_pch(family(dir.path()).path).ok());
  // No temp file is left behind.
  for (const auto& name : kiln::test::files_in(dir.path())) CHECK(name.find(".tmp") == std::string::npos);
  MESSAGE(stats.pch_used << " of 8 used the PCH; " << stats.pch_waits << " waited for it");
}

TEST_CASE("requests that arrive together are weighed together: with more requests than workers, a family of three builds its PCH while other requests take the cores, and its others use it") {
  // The batch is seen whole when no request arrived for kGather; a test thread descheduled longer than
  // that between two submits (a loaded machine) splits it, so the scenario gets three tries. Before the
  // pool weighed batches, every try compiled the family cold and built its PCH only afterwards.
  std::string last;
  for (int attempt = 0; attempt < 3; ++attempt) {
    kiln::test::TempDir dir;
    JitPool pool(fake_pool(4));
    std::vector<std::future<CompileOutcome>> futures;
    for (std::size_t i = 0; i < 3; ++i)
      futures.push_back(pool.submit(family_request(numbered("f", i), {"fake:sleep=150"}), family(dir.path())));
    for (std::size_t i = 0; i < 3; ++i) {
      CompileRequest other = fake_request(numbered("other", i));
      other.source += "\nfake:sleep=400";
      futures.push_back(pool.submit(std::move(other)));
    }
    for (auto& f : futures) REQUIRE(f.get().entry.ok());
    const auto stats = pool.stats();
    // Built while the batch ran, and the family's two others compiled against it.
    if (stats.pch_created == 1 && stats.pch_used == 2) return;
    last = "created " + std::to_string(stats.pch_created) + ", used " + std::to_string(stats.pch_used);
  }
  FAIL("three tries, none built the PCH during the batch for the family's others: " << last);
}

namespace {

// The lines of `file` (none when it is missing).
std::vector<std::string> lines_of(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// A request of `kernels` kernels that appends its unit's name to `order` when it runs, then obeys `controls`.
CompileRequest table_request(const std::string& unit, std::size_t kernels, const std::filesystem::path& order,
                             std::vector<std::string> controls = {}) {
  CompileRequest r = fake_request(unit);
  r.kernels.clear();
  r.expressions.clear();
  for (std::size_t k = 0; k < kernels; ++k) {
    r.kernels.push_back({numbered(unit + "_k", k), numbered("_Z" + unit, k)});
    r.expressions.push_back(numbered(unit + "_k", k));
  }
  r.source += "\nfake:append=" + order.string();
  for (const auto& c : controls) r.source += "\n" + c;
  return r;
}

// Occupies `workers` workers of `pool` until `release` exists: each appends "blocker" to `order` once
// it runs, and this waits until all have, so that what is submitted next queues up behind them.
// Each blocker is estimated at `estimate_ms` (by default, long done when it is looked at: a worker about to
// be free).
std::vector<std::future<CompileOutcome>> occupy(JitPool& pool, unsigned workers, const std::filesystem::path& order,
                                                const std::filesystem::path& release, double estimate_ms = 1) {
  std::vector<std::future<CompileOutcome>> blockers;
  for (unsigned i = 0; i < workers; ++i)
    blockers.push_back(
        pool.submit(table_request(numbered("blocker", i), 1, order, {"fake:wait=" + release.string()}), {}, estimate_ms));
  REQUIRE(eventually([&] { return lines_of(order).size() == workers; }));
  return blockers;
}

}  // namespace

TEST_CASE("a request alone gets the free cores' threads when it has kernels to split among them; one of a single kernel keeps one") {
  kiln::test::TempDir dir;
  JitPoolOptions o = fake_pool(4);
  o.cores = 4;
  JitPool pool(o);
  const CompileOutcome two = pool.compile(table_request("two", 2, dir.path() / "order"), {}, 100);
  REQUIRE(two.entry.ok());
  CHECK(kiln::test::threads_of(two) == 4);
  // ptxas splits a unit by function: one kernel's compile only pays for the threads (1.22x: docs/facts.md,
  // "Compilers: NVRTC, nvJitLink and CuPy").
  const CompileOutcome one = pool.compile(table_request("one", 1, dir.path() / "order"), {}, 100);
  REQUIRE(one.entry.ok());
  CHECK(kiln::test::threads_of(one) == 1);
}

TEST_CASE("queued requests run longest first, by their estimates; those without one keep their order after them") {
  kiln::test::TempDir dir;
  const auto order = dir.path() / "order", release = dir.path() / "release";
  JitPool pool(fake_pool(1));
  auto blockers = occupy(pool, 1, order, release);
  // Before, the pool took them in the order they came: u1, c, b, u2, a.
  std::vector<std::future<CompileOutcome>> futures;
  futures.push_back(pool.submit(table_request("u1", 1, order)));
  futures.push_back(pool.submit(table_request("c", 1, order), {}, 100));
  futures.push_back(pool.submit(table_request("b", 1, order), {}, 300));
  futures.push_back(pool.submit(table_request("u2", 1, order)));
  futures.push_back(pool.submit(table_request("a", 1, order), {}, 5000));
  std::ofstream(release).put('x');
  for (auto& f : blockers) REQUIRE(f.get().entry.ok());
  for (auto& f : futures) REQUIRE(f.get().entry.ok());
  CHECK(lines_of(order) == std::vector<std::string>{"blocker0", "a", "b", "c", "u1", "u2"});
}

TEST_CASE("a unit of many kernels that would end last however the rest were spread runs on every core's threads beside the others; a long one that would not, and a short one, on one") {
  kiln::test::TempDir dir;
  const auto order = dir.path() / "order", release = dir.path() / "release", a_release = dir.path() / "a-release";
  const long cores = std::max(1u, std::thread::hardware_concurrency());
  JitPool pool(fake_pool(2));
  auto blockers = occupy(pool, 2, order, release);
  // 8,200 ms of work on 2 workers: a (5,000 ms alone) ends last however the rest is spread; d (3,000)
  // does not, once a runs; b and c have one kernel. a runs until the others are done.
  auto b = pool.submit(table_request("b", 1, order), {}, 100);
  auto a = pool.submit(table_request("a", 5, order, {"fake:wait=" + a_release.string()}), {}, 5000);
  auto d = pool.submit(table_request("d", 5, order), {}, 3000);
  auto c = pool.submit(table_request("c", 1, order), {}, 100);
  std::ofstream(release).put('x');
  for (auto& f : blockers) REQUIRE(f.get().entry.ok());
  const CompileOutcome ob = b.get(), oc = c.get(), od = d.get();
  std::ofstream(a_release).put('x');
  const CompileOutcome oa = a.get();
  for (const auto* o : {&oa, &ob, &oc, &od}) REQUIRE(o->entry.ok());
  // Before, each of them had one thread: the pool gave threads only to a request alone.
  CHECK(kiln::test::threads_of(oa) == (cores > 1 ? cores : 1));
  CHECK(kiln::test::threads_of(od) == 1);
  CHECK(kiln::test::threads_of(ob) == 1);
  CHECK(kiln::test::threads_of(oc) == 1);
  CHECK(pool.stats().split_critical == (cores > 1 ? 1u : 0u));
  // With a holding one worker, the other ran d, b and c in that order (the longest first).
  const auto ran = lines_of(order);
  REQUIRE(ran.size() == 6);
  std::vector<std::string> others;
  for (const auto& unit : ran)
    if (unit != "a" && !unit.starts_with("blocker")) others.push_back(unit);
  CHECK(others == std::vector<std::string>{"d", "b", "c"});
}

TEST_CASE("while the critical path's unit runs, the others leave it its cores where they still end before it") {
  kiln::test::TempDir dir;
  const auto order = dir.path() / "order", release = dir.path() / "release", spans = dir.path() / "spans",
             a_release = dir.path() / "a-release";
  JitPoolOptions options = fake_pool(4);
  options.cores = 4;  // one critical unit keeps kCriticalCores (2): two cores for the others, not three
  JitPool pool(options);
  auto blockers = occupy(pool, 4, order, release);
  const std::string span = "fake:span=" + spans.string();
  auto a = pool.submit(table_request("a", 5, order, {"fake:wait=" + a_release.string()}), {}, 20'000);
  std::vector<std::future<CompileOutcome>> others;
  for (std::size_t i = 0; i < 5; ++i)
    others.push_back(pool.submit(table_request(numbered("o", i), 1, order, {span, "fake:sleep=150"}), {}, 300));
  std::ofstream(release).put('x');
  for (auto& f : blockers) REQUIRE(f.get().entry.ok());
  for (auto& f : others) REQUIRE(f.get().entry.ok());
  std::ofstream(a_release).put('x');
  const CompileOutcome oa = a.get();
  REQUIRE(oa.entry.ok());
  CHECK(kiln::test::threads_of(oa) == 4);
  // a ran all along: at most two of the others at a time (before, three: one per free worker).
  std::size_t running = 0, most = 0;
  const auto lines = lines_of(spans);
  CHECK(lines.size() == 10);
  for (const std::string& line : lines) {
    if (line[0] == '+') most = std::max(most, ++running);
    else --running;
  }
  CHECK(most >= 1);
  CHECK(most <= 2);
}

namespace {

// Whether `unit` has run (appended itself to `order`) within `ms` milliseconds.
bool runs_within(const std::filesystem::path& order, const std::string& unit, int ms) {
  return eventually([&] {
    const auto ran = lines_of(order);
    return std::find(ran.begin(), ran.end(), unit) != ran.end();
  }, std::chrono::milliseconds(ms));
}

}  // namespace

TEST_CASE("with every worker busy, a request that would wait long for one and then end last runs at once beyond them, up to one worker in eight more") {
  kiln::test::TempDir dir;
  const auto order = dir.path() / "order", release = dir.path() / "release";
  JitPoolOptions options = fake_pool(8);
  options.cores = 8;
  JitPool pool(options);
  // Eight requests of 10 s each run: the first worker frees in ~10 s, and x (10 s) would then end last.
  auto blockers = occupy(pool, 8, order, release, 10'000);
  auto x = pool.submit(table_request("x", 1, order, {"fake:wait=" + release.string()}), {}, 10'000);
  // Before, x waited for a blocker to end: the 19-unit set's 17th CUB unit ended 0.3 s after the rest.
  CHECK(runs_within(order, "x", 30'000));
  // One in eight more at most: y waits, though it too would end last.
  auto y = pool.submit(table_request("y", 1, order), {}, 10'000);
  CHECK_FALSE(runs_within(order, "y", 300));
  std::ofstream(release).put('x');
  for (auto& f : blockers) REQUIRE(f.get().entry.ok());
  REQUIRE(x.get().entry.ok());
  REQUIRE(y.get().entry.ok());
  CHECK(pool.stats().beyond >= 1);   // x; y too if a thread took it while 8 were still busy
  CHECK(pool.stats().spawned == 9);  // never a tenth
}

TEST_CASE("with every worker busy, a request waits when a worker frees soon, when it would still end before the running ones, or in a pool of fewer than eight") {
  kiln::test::TempDir dir;
  const auto order = dir.path() / "order", release = dir.path() / "release";
  // `workers` blockers estimated at `estimate_ms` each run; x (10 s) waits for one of them.
  const auto x_waits = [&](unsigned workers, double estimate_ms) {
    JitPool pool(fake_pool(workers));
    auto blockers = occupy(pool, workers, order, release, estimate_ms);
    auto x = pool.submit(table_request("x", 1, order), {}, 10'000);
    CHECK_FALSE(runs_within(order, "x", 300));
    std::ofstream(release).put('x');
    for (auto& f : blockers) REQUIRE(f.get().entry.ok());
    REQUIRE(x.get().entry.ok());
    CHECK(pool.stats().beyond == 0);
  };
  SUBCASE("the running requests' estimates are spent: a worker is about to be free") { x_waits(8, 1); }
  SUBCASE("four workers: none beyond them") { x_waits(4, 10'000); }
  SUBCASE("waiting, it still ends before the longest running request") {
    JitPool pool(fake_pool(8));
    auto blockers = occupy(pool, 7, order, release, 20'000);
    const auto short_release = dir.path() / "short-release";
    blockers.push_back(pool.submit(table_request("short", 1, order, {"fake:wait=" + short_release.string()}), {}, 5'000));
    REQUIRE(runs_within(order, "short", 30'000));
    // The first worker frees in ~5 s; x (2 s) then ends by ~7 s, long before 20 s.
    auto x = pool.submit(table_request("x", 1, order), {}, 2'000);
    CHECK_FALSE(runs_within(order, "x", 300));
    std::ofstream(short_release).put('x');
    REQUIRE(x.get().entry.ok());
    std::ofstream(release).put('x');
    for (auto& f : blockers) REQUIRE(f.get().entry.ok());
    CHECK(pool.stats().beyond == 0);
  }
}

TEST_CASE("the unit on a table's critical path neither builds its family's PCH nor waits for it; a shorter one of the family builds it") {
  if (std::thread::hardware_concurrency() < 2) {
    MESSAGE("skipped: one core, so no unit is given threads");
    return;
  }
  kiln::test::TempDir dir;
  const auto order = dir.path() / "order", release = dir.path() / "release";
  JitPool pool(fake_pool(2));
  auto blockers = occupy(pool, 2, order, release);
  // Four of one family on two workers: a PCH pays, and the first taken (the longest) would have built it.
  auto a = pool.submit(table_request("a", 5, order, {"fake:sleep=300"}), family(dir.path()), 5000);
  std::vector<std::future<CompileOutcome>> others;
  for (std::size_t i = 0; i < 3; ++i)
    others.push_back(pool.submit(table_request(numbered("f", i), 1, order, {"fake:sleep=50"}), family(dir.path()), 100));
  std::ofstream(release).put('x');
  for (auto& f : blockers) REQUIRE(f.get().entry.ok());
  const CompileOutcome oa = a.get();
  REQUIRE(oa.entry.ok());
  CHECK(oa.pch == kiln::detail::PchResult::none);
  CHECK(kiln::test::threads_of(oa) == static_cast<long>(std::thread::hardware_concurrency()));
  std::size_t created = 0;
  for (auto& f : others) {
    const CompileOutcome o = f.get();
    REQUIRE(o.entry.ok());
    created += o.pch == kiln::detail::PchResult::created;
  }
  CHECK(created == 1);
  CHECK(pool.stats().pch_created == 1);
}

TEST_CASE("two long units of one family among many short ones: both go cold at once, ahead of the batch they came with, and neither builds the PCH") {
  // The 200-unit registry's shape (docs/DESIGN.md, "Scheduling a table"): its two CUB units, one kernel
  // each, are its critical path. Before, they waited for their batch, then one built the family's PCH
  // (1.6 times a cold compile) while the other waited behind it: the table ended ~1.5 cold compiles later.
  kiln::test::TempDir dir;
  const auto spans = dir.path() / "spans";
  const std::string span = "fake:span=" + spans.string();
  JitPoolOptions o = fake_pool(4);
  o.cores = 4;
  JitPool pool(o);
  std::vector<std::future<CompileOutcome>> shorts;
  for (std::size_t i = 0; i < 12; ++i)
    shorts.push_back(pool.submit(table_request(numbered("s", i), 1, dir.path() / "order", {"fake:sleep=30"}), {}, 20));
  auto a = pool.submit(family_request("cub_a", {span, "fake:sleep=300"}), family(dir.path()), 5000);
  auto b = pool.submit(family_request("cub_b", {span, "fake:sleep=300"}), family(dir.path()), 5000);
  for (auto& f : shorts) REQUIRE(f.get().entry.ok());
  const CompileOutcome oa = a.get(), ob = b.get();
  REQUIRE(oa.entry.ok());
  REQUIRE(ob.entry.ok());
  CHECK(oa.pch == kiln::detail::PchResult::none);
  CHECK(ob.pch == kiln::detail::PchResult::none);
  CHECK(kiln::test::threads_of(oa) == 1);  // one kernel: threads would not shorten it
  // Both ran at once: each started before either ended (an idle worker may build the PCH afterwards,
  // for the next process: a later span).
  const auto lines = lines_of(spans);
  REQUIRE(lines.size() >= 4);
  CHECK(lines[0].front() == '+');
  CHECK(lines[1].front() == '+');
  CHECK(lines[0] != lines[1]);
}

TEST_CASE("in a full pool, a family of two whose PCH build would make it end last compiles cold; one that would not builds it") {
  // Family estimates 1000 ms each among others: a PCH build then warm compile (1.85 of a cold one, on
  // one worker after another) outlasts the load's share of a worker in the first case, not the second.
  for (const double others_each : {100.0, 400.0}) {
    CAPTURE(others_each);
    kiln::test::TempDir dir;
    JitPoolOptions o = fake_pool(4);
    o.cores = 4;
    JitPool pool(o);
    std::vector<std::future<CompileOutcome>> others;
    for (std::size_t i = 0; i < 40; ++i)
      others.push_back(pool.submit(table_request(numbered("s", i), 1, dir.path() / "order", {"fake:sleep=5"}), {}, others_each));
    auto a = pool.submit(family_request("fa", {"fake:sleep=50"}), family(dir.path()), 1000);
    auto b = pool.submit(family_request("fb", {"fake:sleep=50"}), family(dir.path()), 1000);
    for (auto& f : others) REQUIRE(f.get().entry.ok());
    const CompileOutcome oa = a.get(), ob = b.get();
    REQUIRE(oa.entry.ok());
    REQUIRE(ob.entry.ok());
    const bool built = oa.pch == kiln::detail::PchResult::created || ob.pch == kiln::detail::PchResult::created;
    // 40 x 100 + 2000 = 6000 ms of load: 1000 x 1.85 x 4 workers = 7400 would end last; 40 x 400 + 2000 would not.
    CHECK(built == (others_each == 400.0));
  }
}

TEST_CASE("a family no larger than the pool compiles cold at once, and no worker builds its PCH afterwards: a PCH is built only where this process uses it") {
  // An idle worker used to build the PCH of a family compiled cold, for the next process: work (and a
  // ~190 MB file) that outlived what the process asked for, even for a family of one unit.
  kiln::test::TempDir dir;
  for (const std::size_t units : {1u, 3u}) {
    CAPTURE(units);
    JitPool pool(fake_pool(4));
    std::vector<std::future<CompileOutcome>> futures;
    for (std::size_t i = 0; i < units; ++i)
      futures.push_back(pool.submit(family_request(numbered("cold", i)), family(dir.path())));
    for (auto& f : futures) {
      const CompileOutcome o = f.get();
      REQUIRE(o.entry.ok());
      CHECK(o.pch == kiln::detail::PchResult::none);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // time enough for a build to have begun
    CHECK(pool.stats().pch_created == 0);
    CHECK_FALSE(std::filesystem::exists(family(dir.path()).path));
  }
}

namespace {

// The status of `pid`, a child of this process, reaped within `limit`; nullopt if it did not end.
std::optional<int> reap_within(pid_t pid, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    if (::waitpid(pid, &status, WNOHANG) == pid) return status;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return std::nullopt;
}

}  // namespace

TEST_CASE("a worker dies with its host: a host that exits without stopping its pool leaves no worker running") {
  // The host: a shell that starts a worker as the pool does (its pid in KILN_JITD_HOST, a pipe on its
  // input that stays open), then exits without closing it, as a process exits with the process-wide pool
  // (leaked on purpose) or dies. The worker then waited for input forever. A shell, not a forked copy of
  // this process: this process may have threads (ThreadSanitizer runs this suite).
  REQUIRE(::prctl(PR_SET_CHILD_SUBREAPER, 1) == 0);  // this process adopts the orphan, to reap it
  kiln::test::TempDir dir;
  const std::string pid_file = (dir.path() / "worker.pid").string();
  const std::string worker = fake_jitd().string();
  int input[2];
  REQUIRE(::pipe(input) == 0);
  const pid_t host = ::fork();
  REQUIRE(host >= 0);
  if (host == 0) {
    ::dup2(input[0], 3);
    ::execl("/bin/sh", "sh", "-c", "KILN_JITD_HOST=$$ \"$0\" <&3 >/dev/null & echo $! > \"$1\"; sleep 0.5",
            worker.c_str(), pid_file.c_str(), static_cast<char*>(nullptr));
    std::_Exit(127);
  }
  ::close(input[0]);
  const auto host_status = reap_within(host, std::chrono::seconds(30));
  REQUIRE(host_status);
  REQUIRE(WIFEXITED(*host_status));
  REQUIRE(WEXITSTATUS(*host_status) == 0);
  const pid_t orphan = static_cast<pid_t>(std::stol(kiln::test::read_text(pid_file)));
  const auto worker_status = reap_within(orphan, std::chrono::seconds(5));
  if (!worker_status) {
    ::kill(orphan, SIGKILL);
    (void)reap_within(orphan, std::chrono::seconds(5));
  }
  ::close(input[1]);
  ::prctl(PR_SET_CHILD_SUBREAPER, 0);
  REQUIRE_MESSAGE(worker_status, "the worker outlived its host");
  CHECK(WIFSIGNALED(*worker_status));
  CHECK(WTERMSIG(*worker_status) == SIGKILL);
}

TEST_CASE("a worker started for a host that is gone exits at once") {
  // Started with a host pid that is not its parent's: as if its host died before it ran.
  const std::string worker = fake_jitd().string();
  std::string host = std::string(kiln::detail::kHostPidVariable) + "=1";
  char* envp[] = {host.data(), nullptr};
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::execle(worker.c_str(), worker.c_str(), static_cast<char*>(nullptr), envp);
    std::_Exit(127);
  }
  const auto status = reap_within(child, std::chrono::seconds(10));
  if (!status) {
    ::kill(child, SIGKILL);
    (void)reap_within(child, std::chrono::seconds(5));
  }
  REQUIRE(status);
  CHECK(WIFEXITED(*status));
  CHECK(WEXITSTATUS(*status) == 3);
}

TEST_CASE("a worker makes every file private from its creation: it runs with umask 077") {
  // NVRTC writes a PCH under the umask: its temp file was readable by others until it was published.
  JitPool pool(fake_pool(1));
  const CompileOutcome o = pool.compile(fake_request("private", {"fake:umask"}));
  REQUIRE(o.entry.ok());
  CHECK(compiled_in(o) != ::getpid());
  CHECK(o.log.find("umask=077") != std::string::npos);
}

TEST_CASE("shutdown within a bound kills a busy worker and fails later requests at once") {
  kiln::test::TempDir marks;
  JitPool pool(fake_pool(1));
  auto busy = pool.submit(fake_request("busy", {option("hang", marks.path(), 100)}));
  std::set<pid_t> seen;
  const pid_t worker = wait_for_mark(marks.path(), 1, seen);
  const auto start = std::chrono::steady_clock::now();
  pool.shutdown(std::chrono::seconds(2));
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(2));
  CHECK(gone(worker));
  CHECK(busy.get().entry.error().find("shut down while compiling") != std::string::npos);
  auto later = pool.submit(fake_request("later"));
  REQUIRE(later.wait_for(std::chrono::seconds(1)) == std::future_status::ready);
  CHECK(later.get().entry.error().find("shut down before compiling") != std::string::npos);
}

TEST_CASE("a PCH that cannot be written only means compiles without one: every unit succeeds, with one warning") {
  // The unit chosen to build the PCH failed when its file could not be written (a full disk).
  kiln::test::TempDir dir;
  const kiln::detail::PchFamily unwritable{"a-family", dir.path() / "no-such-dir" / "a-family.pch"};
  JitPool pool(fake_pool(1));
  std::vector<std::future<CompileOutcome>> futures;
  for (std::size_t i = 0; i < 4; ++i)
    futures.push_back(pool.submit(family_request(numbered("f", i), {"fake:sleep=20"}), unwritable));
  for (auto& f : futures) {
    const CompileOutcome o = f.get();
    REQUIRE_MESSAGE(o.entry.ok(), o.entry.error());
  }
  CHECK(pool.stats().pch_created == 0);
  REQUIRE(pool.warnings().size() == 1);
  CHECK(pool.warnings()[0].find("not using a precompiled header") != std::string::npos);
}

TEST_CASE("a family's PCH is unpacked once, in the host: each fresh worker opens that copy and unpacks nothing") {
  kiln::test::TempDir dir;
  const auto trace = dir.path() / "trace.jsonl";
  plant_pch(family(dir.path()).path, kiln::test::kFakePch);
  kiln::test::ScopedEnv env("KILN_JIT_TRACE", trace.c_str());
  JitPool pool(fake_pool(1));
  const auto used = [&](const char* unit) {
    const CompileOutcome o = pool.compile(family_request(unit), family(dir.path()));
    REQUIRE_MESSAGE(o.entry.ok(), o.entry.error());
    CHECK(o.pch == kiln::detail::PchResult::used);  // the fake compiler read the PCH's bytes by its path
    CHECK(o.pch_unpack_ms == 0);
    return pool.worker_pids().at(0);
  };
  const pid_t first = used("u1");
  REQUIRE(pool.compile(fake_request("plain")).entry.ok());  // the worker is no longer fresh: replaced
  const pid_t second = used("u2");
  CHECK(second != first);
  CHECK(used("u3") == second);  // a worker that read the PCH keeps its copy open
  CHECK(memory_files_named("kiln-pch") == 1);  // one copy in the host, made once
  CHECK(pool.warnings().empty());

  const std::string u1 = trace_line(trace, "tests/u1"), u2 = trace_line(trace, "tests/u2"), u3 = trace_line(trace, "tests/u3");
  INFO(u1 << "\n" << u2 << "\n" << u3);
  CHECK(trace_field(u1, "host_copy") == 1);
  CHECK(trace_field(u1, "host_unpack") > 0);  // made for the first worker
  CHECK(trace_field(u1, "unpack") == 0);
  CHECK(trace_field(u2, "host_copy") == 1);
  CHECK(trace_field(u2, "host_unpack") == 0);  // the same copy for the second
  CHECK(trace_field(u2, "unpack") == 0);
  CHECK(trace_field(u3, "host_copy") == 0);  // the worker's own is enough
  CHECK(trace_field(u3, "unpack") == 0);
}

TEST_CASE("the host keeps its unpacked PCH copies while the pool works, at most kHostPchFamilies of them, and drops them once it is idle") {
  kiln::test::TempDir dir;
  std::vector<kiln::detail::PchFamily> families;
  for (std::size_t i = 0; i < kiln::detail::kHostPchFamilies + 1; ++i) {
    families.push_back({numbered("family-", i), dir.path() / numbered("family-", i)});
    plant_pch(families.back().path, kiln::test::kFakePch);
  }
  JitPoolOptions options = fake_pool(1);
  options.pch_linger = std::chrono::seconds(2);
  JitPool pool(options);
  for (std::size_t i = 0; i < families.size(); ++i) {
    // A request of no family between: the next family's goes to a fresh worker, which needs a copy.
    REQUIRE(pool.compile(fake_request(numbered("plain", i))).entry.ok());
    const CompileOutcome o = pool.compile(family_request(numbered("u", i)), families[i]);
    REQUIRE(o.entry.ok());
    CHECK(o.pch == kiln::detail::PchResult::used);
    CHECK(memory_files_named("kiln-pch") == std::min(i + 1, kiln::detail::kHostPchFamilies));
  }
  // Idle: within the linger (2 s here) and a margin, none is left.
  CHECK(eventually([] { return memory_files_named("kiln-pch") == 0; }, std::chrono::seconds(10)));
  // And the pool makes one again when it is asked.
  REQUIRE(pool.compile(fake_request("plain-again")).entry.ok());
  CHECK(pool.compile(family_request("again"), families[0]).pch == kiln::detail::PchResult::used);
}

TEST_CASE("a worker that cannot open the host's copy of a PCH unpacks the packed file itself, and uses it") {
  kiln::test::TempDir dir;
  const auto packed = family(dir.path()).path;
  plant_pch(packed, kiln::test::kFakePch);
  auto worker = kiln::detail::spawn_worker(fake_jitd(), true);
  REQUIRE_MESSAGE(worker.ok(), worker.error());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  const auto in_time = [&] { return std::chrono::steady_clock::now() < deadline; };
  REQUIRE(kiln::detail::read_hello(*worker, in_time).ok());
  CompileRequest r = family_request("fallback");
  r.pch = kiln::detail::PchMode::use;
  r.pch_path = packed.string();
  // A descriptor the host does not have (a host that dropped its copy, or whose /proc/<pid>/fd is not
  // the user's: not dumpable).
  r.pch_unpacked = "/proc/" + std::to_string(::getpid()) + "/fd/1000000";
  const kiln::detail::Answer a = kiln::detail::exchange(*worker, r, in_time);
  worker->retire(std::chrono::milliseconds(300));
  REQUIRE_MESSAGE(a.answered, a.problem);
  REQUIRE(a.outcome.entry.ok());
  CHECK(a.outcome.pch == kiln::detail::PchResult::used);
  CHECK(a.outcome.pch_unpack_ms > 0);
  CHECK(a.outcome.log.find("could not be unpacked") == std::string::npos);
}

TEST_CASE("a host that is not dumpable makes no copy of a PCH (its workers could not open it): each worker unpacks the file") {
  kiln::test::TempDir dir;
  const auto trace = dir.path() / "trace.jsonl";
  plant_pch(family(dir.path()).path, kiln::test::kFakePch);
  kiln::test::ScopedEnv env("KILN_JIT_TRACE", trace.c_str());
  struct Undumpable {
    Undumpable() { ::prctl(PR_SET_DUMPABLE, 0); }
    ~Undumpable() { ::prctl(PR_SET_DUMPABLE, 1); }
  } undumpable;
  JitPool pool(fake_pool(1));
  const CompileOutcome o = pool.compile(family_request("undumpable"), family(dir.path()));
  REQUIRE(o.entry.ok());
  CHECK(o.pch == kiln::detail::PchResult::used);
  CHECK(o.pch_unpack_ms > 0);
  CHECK(memory_files_named("kiln-pch") == 0);
  const std::string line = trace_line(trace, "tests/undumpable");
  INFO(line);
  CHECK(trace_field(line, "host_copy") == 0);
  CHECK(trace_field(line, "unpack") > 0);
}

TEST_CASE("a PCH file that cannot be unpacked, by the host or (a host not dumpable) by the worker: one warning, and its family compiles without one") {
  for (const bool dumpable : {true, false}) {
    CAPTURE(dumpable);
    kiln::test::TempDir dir;
    const auto path = family(dir.path()).path;
    // NVRTC's own bytes under a right sum: a file of an older kiln, never packed.
    const auto temp = dir.path() / "raw.tmp";
    std::ofstream(temp, std::ios::binary) << kiln::test::kFakePch;
    REQUIRE(kiln::detail::publish_summed(temp, path).ok());
    ::prctl(PR_SET_DUMPABLE, dumpable ? 1 : 0);
    JitPool pool(fake_pool(1));
    const CompileOutcome first = pool.compile(family_request("first"), family(dir.path()));
    const CompileOutcome second = pool.compile(family_request("second"), family(dir.path()));
    ::prctl(PR_SET_DUMPABLE, 1);
    REQUIRE(first.entry.ok());
    REQUIRE(second.entry.ok());
    CHECK(first.pch != kiln::detail::PchResult::used);
    CHECK(second.pch == kiln::detail::PchResult::none);  // none asked for: the family has no PCH now
    REQUIRE(pool.warnings().size() == 1);
    CHECK(pool.warnings()[0].find("not using a precompiled header") != std::string::npos);
    CHECK(pool.warnings()[0].find(path.string()) != std::string::npos);
    CHECK(memory_files_named("kiln-pch") == 0);
  }
}

TEST_CASE("a PCH file that fails its sum is deleted and never handed to the compiler; one the compiler rejects is deleted too") {
  kiln::test::TempDir dir;
  const auto path = family(dir.path()).path;
  plant_pch(path, kiln::test::kFakePch);
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(3);
    f.put('#');  // a flipped byte: the sum no longer matches
  }
  JitPool pool(fake_pool(1));
  const CompileOutcome o = pool.compile(family_request("after_damage"), family(dir.path()));
  REQUIRE(o.entry.ok());
  CHECK(o.pch != kiln::detail::PchResult::used);
  CHECK(pool.stats().pch_rejected == 1);
  REQUIRE(pool.warnings().size() == 1);
  CHECK(pool.warnings()[0].find("SHA-256 differs") != std::string::npos);

  kiln::test::TempDir other;
  const auto foreign = family(other.path()).path;
  plant_pch(foreign, "a PCH another NVRTC wrote\n");  // its sum is right; the compiler refuses it
  JitPool pool2(fake_pool(1));
  const CompileOutcome r = pool2.compile(family_request("foreign"), family(other.path()));
  REQUIRE(r.entry.ok());
  CHECK(r.pch == kiln::detail::PchResult::rejected);
  CHECK(pool2.stats().pch_rejected == 1);
  CHECK_FALSE(std::filesystem::exists(foreign));
}

TEST_CASE("the real kiln-jitd started ahead warms up with a kernel of one line, then compiles the first request") {
  JitPool pool(real_pool(2));
  pool.start_ahead(90);
  // The request waits for the worker started ahead, which warms up first.
  auto f = pool.submit(kiln::test::example_request(kiln::test::example_unit("vector_add"), 90));
  const auto o = real_outcome(f);
  if (!o) return;
  REQUIRE_MESSAGE(o->entry.ok(), o->entry.error());
  CHECK(pool.stats().warmed_up == 1);
  CHECK(pool.stats().spawned == 1);
  MESSAGE("vector_add after the warm-up: NVRTC " << o->nvrtc_ms << " ms");
}

TEST_CASE("the real kiln-jitd runs with ASLR off, unless KILN_JIT_PCH=0") {
  JitPool pool(real_pool(1));
  const auto o = [&] {
    auto f = pool.submit(kiln::test::example_request(kiln::test::example_unit("vector_add"), 90));
    return real_outcome(f);
  }();
  if (!o) return;
  REQUIRE(o->entry.ok());
  const pid_t worker = pool.worker_pids().at(0);
  std::ifstream in("/proc/" + std::to_string(worker) + "/personality");
  unsigned long persona = 0;
  in >> std::hex >> persona;
  if (!pool.uses_pch_files()) {
    MESSAGE("skipped: this kernel refuses personality(ADDR_NO_RANDOMIZE) here, so workers keep ASLR on");
    return;
  }
  CHECK((persona & 0x0040000) != 0);

  kiln::test::ScopedEnv env("KILN_JIT_PCH", "0");
  JitPool plain(real_pool(1));
  auto f = plain.submit(kiln::test::example_request(kiln::test::example_unit("vector_add"), 90));
  REQUIRE(real_outcome(f));
  std::ifstream in2("/proc/" + std::to_string(plain.worker_pids().at(0)) + "/personality");
  in2 >> std::hex >> persona;
  CHECK((persona & 0x0040000) == 0);
  CHECK_FALSE(plain.uses_pch_files());
}

TEST_CASE("the real kiln-jitd: two CUB units on one worker build the family's PCH, and a fresh process uses it, for the same kernels") {
  kiln::test::TempDir dir;
  std::optional<CompileOutcome> cold;
  {
    // Both made before either is submitted: the pool weighs requests that arrive within kGather together.
    JitPool pool(real_pool(1));
    CompileRequest ra = cub_request(), rb = cub_request("block_sum_f32_second");
    const kiln::detail::PchFamily fam = cub_family(dir.path());
    auto a = pool.submit(std::move(ra), fam);
    auto b = pool.submit(std::move(rb), fam);
    cold = real_outcome(a);
    if (!cold) return;
    REQUIRE_MESSAGE(cold->entry.ok(), cold->entry.error() << "\n" << cold->log);
    const auto second = real_outcome(b);
    REQUIRE(second);
    REQUIRE_MESSAGE(second->entry.ok(), second->entry.error());
    if (!pool.uses_pch_files()) {
      MESSAGE("skipped: workers keep ASLR on here, so NVRTC cannot read PCH files across processes");
      return;
    }
    CHECK(pool.stats().pch_created == 1);  // by the first, on a fresh worker, for the second
  }
  REQUIRE(kiln::detail::verify_pch(cub_family(dir.path()).path).ok());
  // Kept packed (docs/DESIGN.md, "PCH files at rest"): NVRTC's ~170 MB in a tenth of that, and nothing
  // of NVRTC's own file left beside it.
  const std::uintmax_t packed = std::filesystem::file_size(cub_family(dir.path()).path);
  CHECK(packed < 40'000'000);
  for (const auto& name : kiln::test::files_in(dir.path())) CHECK(name.find(".tmp") == std::string::npos);
  JitPool fresh(real_pool(1));
  auto c = fresh.submit(cub_request("block_sum_f32_again"), cub_family(dir.path()));
  const auto warm = real_outcome(c);
  REQUIRE(warm);
  REQUIRE_MESSAGE(warm->entry.ok(), warm->entry.error());
  INFO(warm->log);
  CHECK(warm->pch == kiln::detail::PchResult::used);
  CHECK(warm->log.find("using precompiled header") != std::string::npos);
  // NVRTC lays the PTX out a little differently with a PCH (measured: 137207 against 137344 bytes): the
  // same kernels, not the same bytes.
  CHECK(kiln::detail::read_cubin(warm->entry->cubin).kernels == kiln::detail::read_cubin(cold->entry->cubin).kernels);
  MESSAGE("block_sum_f32 NVRTC: cold " << cold->nvrtc_ms << " ms; a fresh process with the PCH file " << warm->nvrtc_ms
                                       << " ms (its unpacking included); the file " << packed << " bytes");
}

TEST_CASE("the real kiln-jitd on a full disk (a 1 MiB tmpfs): the PCH's warning says no space left on device, and names the file") {
  kiln::test::TempDir dir;
  const int status = kiln::test::run_in_child([&] {
    // A private mount namespace and a tiny tmpfs: NVRTC's own ENOSPC, not a simulated one. Needs root
    // (CAP_SYS_ADMIN), as CI has; 77 without.
    if (::unshare(CLONE_NEWNS) != 0) return 77;
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return 77;
    if (::mount("tmpfs", dir.path().c_str(), "tmpfs", 0, "size=1m,mode=0700") != 0) return 77;
    kiln::test::ChildChecks checks;
    JitPool pool(real_pool(1));
    // A unit of one small header, twice: one worker, two requests of the family, so the first builds the
    // family's PCH, which NVRTC cannot write (it is larger than the disk).
    const auto request = [](std::string unit) {
      CompileRequest r;
      r.registry = "test";
      r.source_name = unit + ".cu";
      r.unit = std::move(unit);
      r.arch = 90;
      r.headers = {{"kiln_test_twice.cuh", "__device__ inline float kiln_twice(float x) { return 2.0f * x; }\n"}};
      r.source = "#include \"kiln_test_twice.cuh\"\n"
                 "extern \"C\" __global__ void kiln_pch_k(float* x) { x[0] = kiln_twice(x[0]); }\n";
      r.kernels = {{"kiln_pch_k", "kiln_pch_k"}};
      r.expressions = {"kiln_pch_k"};
      return r;
    };
    const kiln::detail::PchFamily family{"full-disk", dir.path() / "full-disk.pch"};
    auto a = pool.submit(request("full_disk_a"), family);
    auto b = pool.submit(request("full_disk_b"), family);
    const auto first = real_outcome(a);
    if (!first) return 77;
    const auto second = real_outcome(b);
    checks.expect(first->entry.ok() && second && second->entry.ok(), "both units compile without the PCH");
    if (!pool.uses_pch_files()) return 77;  // no PCH was asked for
    const auto warnings = pool.warnings();
    const std::string said = warnings.empty() ? std::string() : warnings[0];
    checks.expect(warnings.size() == 1, "one warning, got " + std::to_string(warnings.size()));
    checks.expect(said.find("no space left on device") != std::string::npos, "the warning says why: " + said);
    checks.expect(said.find(family.path.string()) != std::string::npos, "the warning names the file: " + said);
    return checks.exit_code();
  });
  if (status == 77) {
    MESSAGE("skipped: no private mount namespace here (needs root), no NVRTC, or no PCH files across processes");
    return;
  }
  CHECK(status == 0);
}

TEST_CASE("the real kiln-jitd: a worker that compiled another unit first is replaced before it reads a PCH file, which NVRTC would refuse it") {
  kiln::test::TempDir dir;
  {
    // Two units of the family on one worker: the first builds the PCH.
    // Both made before either is submitted: the pool weighs requests that arrive within kGather together.
    JitPool pool(real_pool(1));
    CompileRequest ra = cub_request(), rb = cub_request("block_sum_f32_second");
    const kiln::detail::PchFamily fam = cub_family(dir.path());
    auto a = pool.submit(std::move(ra), fam);
    auto b = pool.submit(std::move(rb), fam);
    const auto first = real_outcome(a);
    if (!first) return;
    REQUIRE_MESSAGE(first->entry.ok(), first->entry.error());
    REQUIRE(real_outcome(b)->entry.ok());
    if (!pool.uses_pch_files()) {
      MESSAGE("skipped: workers keep ASLR on here, so NVRTC cannot read PCH files across processes");
      return;
    }
    REQUIRE(pool.stats().pch_created == 1);
  }
  const auto trace = dir.path() / "trace.jsonl";
  kiln::test::ScopedEnv env("KILN_JIT_TRACE", trace.c_str());
  JitPool pool(real_pool(1));
  // The worker compiles a unit of no family first: its heap is no longer where the PCH's writer's was.
  CompileRequest plain = kiln::test::example_request(kiln::test::example_unit("vector_add"), 90);
  auto p = pool.submit(std::move(plain));
  REQUIRE(real_outcome(p)->entry.ok());
  const pid_t first = pool.worker_pids().front();
  auto c = pool.submit(cub_request("block_sum_f32_again"), cub_family(dir.path()));
  const auto warm = real_outcome(c);
  REQUIRE(warm);
  REQUIRE_MESSAGE(warm->entry.ok(), warm->entry.error());
  INFO(warm->log);
  CHECK(warm->pch == kiln::detail::PchResult::used);
  CHECK(pool.stats().pch_rejected == 0);
  CHECK(pool.worker_pids().front() != first);  // a fresh worker read it
  CHECK(kiln::detail::verify_pch(cub_family(dir.path()).path).ok());  // and the file is still there
  // A worker that read the PCH reads it again without being replaced.
  const pid_t reader = pool.worker_pids().front();
  auto d = pool.submit(cub_request("block_sum_f32_third"), cub_family(dir.path()));
  const auto again = real_outcome(d);
  REQUIRE(again);
  CHECK(again->pch == kiln::detail::PchResult::used);
  CHECK(pool.worker_pids().front() == reader);
  // Another worker after another unit: it opens the copy the host unpacked for the first, and NVRTC takes
  // it (docs/DESIGN.md, "PCH files at rest").
  REQUIRE(pool.compile(kiln::test::example_request(kiln::test::example_unit("vector_add"), 90)).entry.ok());
  auto e = pool.submit(cub_request("block_sum_f32_fourth"), cub_family(dir.path()));
  const auto third_worker = real_outcome(e);
  REQUIRE(third_worker);
  INFO(third_worker->log);
  CHECK(third_worker->pch == kiln::detail::PchResult::used);
  CHECK(pool.worker_pids().front() != reader);
  const std::string first_use = trace_line(trace, "examples/block_sum_f32_again"),
                    kept = trace_line(trace, "examples/block_sum_f32_third"),
                    second_use = trace_line(trace, "examples/block_sum_f32_fourth");
  INFO(first_use << "\n" << kept << "\n" << second_use);
  CHECK(trace_field(first_use, "host_copy") == 1);
  CHECK(trace_field(first_use, "unpack") == 0);
  CHECK(trace_field(kept, "unpack") == 0);
  CHECK(trace_field(second_use, "host_copy") == 1);
  CHECK(trace_field(second_use, "host_unpack") == 0);
  CHECK(trace_field(second_use, "unpack") == 0);
  MESSAGE("block_sum_f32 with the PCH: the host's unpacking " << trace_field(first_use, "host_unpack")
          << " ms, once; NVRTC on each fresh worker " << trace_field(first_use, "nvrtc") << " and "
          << trace_field(second_use, "nvrtc") << " ms, on the worker that kept it " << trace_field(kept, "nvrtc") << " ms");
}

TEST_CASE("the real kiln-jitd killed mid-NVRTC compile of a CUB unit: retried once on a new worker, and the pool keeps serving") {
  kiln::test::TempDir temp;
  // The kill must land while the worker compiles. The worker is stopped first (SIGSTOP) once it is well
  // into NVRTC, and killed only where it has not answered; a test thread starved for the rest of the
  // compile (a loaded machine) finds it answered, and that attempt proves nothing: a fresh pool tries
  // again, at most three times. No outcome below depends on when the kill came.
  for (int attempt = 1; attempt <= 3; ++attempt) {
    JitPool pool(real_pool(1));
    auto future = pool.submit(cub_request("block_sum_f32_try" + std::to_string(attempt)), cub_family(temp.path()));
    // Wait for the worker, then for it to be well into NVRTC (CPU time spent).
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
    REQUIRE(::kill(victim, SIGSTOP) == 0);
    if (future.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
      ::kill(victim, SIGKILL);
      if (!real_outcome(future)) return;  // no NVRTC: the worker answered at once
      MESSAGE("attempt " << attempt << ": the compile ended before the worker was stopped");
      continue;
    }
    REQUIRE(::kill(victim, SIGKILL) == 0);
    const auto o = real_outcome(future);
    if (!o) return;
    REQUIRE_MESSAGE(o->entry.ok(), o->entry.error() << "\n" << o->log);
    CHECK(kiln::detail::check_entry(*o->entry, 90).ok());
    const auto stats = pool.stats();
    if (stats.retried == 0) {
      // Its answer was on its way (sent before the stop) and the pool took it: no compile was cut.
      CHECK(gone(victim));
      MESSAGE("attempt " << attempt << ": the worker had answered before it was stopped");
      continue;
    }
    CHECK(stats.deaths == 1);
    CHECK(stats.retried == 1);
    CHECK(stats.spawned == 2);
    CHECK(gone(victim));
    const auto pids = pool.worker_pids();
    REQUIRE(pids.size() == 1);
    CHECK(pids.front() != victim);

    // The pool keeps serving, on the retried worker.
    auto again = pool.submit(cub_request("block_sum_f32_again"), cub_family(temp.path()));
    const auto next = real_outcome(again);
    REQUIRE(next);
    REQUIRE_MESSAGE(next->entry.ok(), next->entry.error());
    CHECK(pool.stats().deaths == 1);
    return;
  }
  FAIL("three attempts: each compile ended before its worker could be stopped");
}

TEST_CASE("JIT workers killed at random points, while some build and use a family's PCH: each request succeeds or fails clearly; the pool keeps serving; the cache stays consistent") {
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
        const std::vector<pid_t> victims = pool.worker_pids();
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
              // Half of them one PCH family (so PCH files built and used), half plain.
              const CompileOutcome o = key % 2 ? pool.compile(family_request(numbered("k", key), {sleep}), family(tmp.path()))
                                               : pool.compile(fake_request(numbered("k", key), {sleep}));
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
    for (std::size_t i = 0; i < 4; ++i) CHECK(pool.compile(family_request(numbered("after", i)), family(tmp.path())).entry.ok());
    CHECK(pool.compile(fake_request("after_plain")).entry.ok());
    const auto stats = pool.stats();
    MESSAGE(killed << " kills: " << compiled << " requests compiled and cached, " << failed
                   << " failed clearly (their retry was killed too); pool: " << stats.deaths << " deaths, " << stats.retried
                   << " retried, " << stats.spawned << " workers started, " << stats.pch_created << " PCH built, "
                   << stats.pch_used << " used");
    const std::lock_guard lock(mutex);
    for (const pid_t w : pool.worker_pids()) seen.insert(w);
  }
  for (const auto& e : unexpected) FAIL_CHECK("unexpected error: " << e);
  CHECK(killed > 0);
  CHECK(compiled + failed == kClients * kPerClient);
  CHECK(compiled > failed);
  // Nothing of the pool's runs on.
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

// A unit compiled in parts (docs/DESIGN.md, "A unit's kernels over several workers"), on fake workers.
namespace {

CompileRequest three_kernels(std::string unit, std::vector<std::string> options = {}) {
  CompileRequest r = fake_request(std::move(unit), std::move(options));
  r.kernels = {{"a", "_Z1av"}, {"b", "_Z1bv"}, {"c", "_Z1cv"}};
  r.expressions = {"a", "b", "c"};
  return r;
}

}  // namespace

// A pool that splits every unit it may (KILN_JIT_SPLIT=1), whatever the cost model says.
JitPoolOptions splitting_pool(JitPoolOptions o) {
  o.split = kiln::detail::SplitMode::always;
  return o;
}

TEST_CASE("a splittable unit on the critical path compiles as parts, one entry of their images; otherwise whole") {
  kiln::test::TempDir dir;
  const auto trace = dir.path() / "trace.jsonl";
  {
    kiln::test::ScopedEnv env("KILN_JIT_TRACE", trace.c_str());
    JitPool pool(splitting_pool(fake_pool(4)));
    // Alone, its estimate is the whole load: on the critical path.
    const CompileOutcome o = pool.compile(three_kernels("u"), {}, 900, {true, 300});
    REQUIRE_MESSAGE(o.entry.ok(), o.entry.error());
    CHECK(o.entry->cubin.empty());
    REQUIRE(o.entry->parts.size() == 3);
    REQUIRE(o.entry->kernels.size() == 3);
    std::set<std::uint32_t> served;
    for (const auto& part : o.entry->parts) {
      REQUIRE(part.kernels.size() == 1);
      CHECK(part.cubin == three_kernels("u").source);  // the fake's cubin: the source every part compiles
      served.insert(part.kernels[0]);
    }
    CHECK(served == std::set<std::uint32_t>{0, 1, 2});
    CHECK(o.entry->kernels[1].name == "b");  // the unit's order, whichever part ended first
    CHECK(o.entry->kernels[1].lowered == "_Z1bv");
    CHECK(pool.stats().split_units == 1);
    CHECK(pool.stats().parts == 3);

    // Not splittable, or a single kernel: whole.
    CHECK(pool.compile(three_kernels("v"), {}, 900, {false, 300}).entry->parts.empty());
    CompileRequest one = three_kernels("w");
    one.kernels.resize(1);
    one.expressions.resize(1);
    CHECK(pool.compile(one, {}, 900, {true, 300}).entry->parts.empty());
    CHECK(pool.stats().split_units == 1);
  }
  std::ifstream in(trace);
  std::vector<std::string> parts;
  for (std::string line; std::getline(in, line);)
    if (line.find("\"part\":") != std::string::npos) parts.push_back(line);
  CHECK(parts.size() == 3);  // u's, each marked; v and w compiled whole

  // KILN_JIT_SPLIT=0: whole.
  kiln::test::ScopedEnv env("KILN_JIT_SPLIT", "0");
  JitPool off(fake_pool(4));
  CHECK(off.compile(three_kernels("x"), {}, 900, {true, 300}).entry->parts.empty());
  CHECK(off.stats().split_units == 0);
  CHECK(off.warnings().empty());
  kiln::test::ScopedEnv bad("KILN_JIT_SPLIT", "sometimes");
  JitPool warned(fake_pool(1));
  const std::vector<std::string> warnings = warned.warnings();
  CHECK(std::count_if(warnings.begin(), warnings.end(), [](const std::string& w) {
          return w.find("KILN_JIT_SPLIT=") != std::string::npos;
        }) == 1);
}

TEST_CASE("a part that fails fails its unit, with the part's error and log") {
  JitPool pool(splitting_pool(fake_pool(4)));
  const CompileOutcome o = pool.compile(three_kernels("u", {"fake:fail_kernel=b"}), {}, 900, {true, 300});
  REQUIRE_FALSE(o.entry.ok());
  CHECK(o.entry.error() == "fake: b does not compile (part 2 of 3, kernels b)");
  CHECK(o.log == "the log of b");
  CHECK(pool.stats().split_units == 1);
}

namespace {

// The "split" lines of a pool's trace: the cost model's decisions.
std::vector<std::string> split_lines(const std::filesystem::path& trace) {
  std::ifstream in(trace);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);)
    if (line.find("\"event\":\"split\"") != std::string::npos) lines.push_back(line);
  return lines;
}

CompileRequest three_instances(std::string unit) {
  CompileRequest r = three_kernels(std::move(unit));
  r.expressions = {"k<1>", "k<2>", "k<3>"};
  return r;
}

}  // namespace

TEST_CASE("by default a unit on the critical path is compiled whole unless the cost model says parts end sooner") {
  kiln::test::TempDir dir;
  const auto trace = dir.path() / "trace.jsonl";
  kiln::test::ScopedEnv unset("KILN_JIT_SPLIT", std::nullopt);
  {
    kiln::test::ScopedEnv env("KILN_JIT_TRACE", trace.c_str());
    JitPool pool(fake_pool(4));
    // Its kernels' sizes unknown (no embedded cubin): whole.
    CHECK(pool.compile(three_instances("unknown"), {}, 900, {true, 30}).entry->parts.empty());
    // Plain kernels (extern "C"): every part would compile all three again. Whole.
    CHECK(pool.compile(three_kernels("plain"), {}, 900, {true, 30, {0.4, 0.3, 0.3}}).entry->parts.empty());
    // One kernel holds nearly all the code: its part alone takes about as long as the whole. Whole.
    CHECK(pool.compile(three_instances("dominant"), {}, 900, {true, 30, {0.9, 0.05, 0.05}}).entry->parts.empty());
    // The shared cost (the headers' parse) is most of the unit: each part pays it again. Whole.
    CHECK(pool.compile(three_instances("headers"), {}, 900, {true, 700, {0.34, 0.33, 0.33}}).entry->parts.empty());
    CHECK(pool.stats().split_units == 0);
    // Three template instances of a third each, little shared: the longest part ends in well under the
    // whole's time. Parts.
    const CompileOutcome even = pool.compile(three_instances("even"), {}, 900, {true, 30, {0.34, 0.33, 0.33}});
    REQUIRE_MESSAGE(even.entry.ok(), even.entry.error());
    CHECK(even.entry->parts.size() == 3);
    CHECK(pool.stats().split_units == 1);
  }
  const auto lines = split_lines(trace);
  REQUIRE(lines.size() == 5);  // one decision per unit, each said once
  const auto line_of = [&](const std::string& unit) {
    for (const auto& l : lines)
      if (l.find("\"unit\":\"tests/" + unit + "\"") != std::string::npos) return l;
    return std::string();
  };
  CHECK(line_of("unknown").find("\"parts\":false") != std::string::npos);
  CHECK(line_of("unknown").find("not known") != std::string::npos);
  CHECK(line_of("plain").find("no kernel is a template") != std::string::npos);
  CHECK(line_of("dominant").find("\"parts\":false") != std::string::npos);
  CHECK(line_of("headers").find("\"parts\":false") != std::string::npos);
  CHECK(line_of("even").find("\"parts\":true") != std::string::npos);
}

TEST_CASE("KILN_JIT_SPLIT: 0 never, 1 always, unset or auto the cost model; anything else warns and keeps the model") {
  using kiln::detail::SplitMode;
  CHECK(*kiln::detail::jit_split_from(nullptr) == SplitMode::cost_model);
  CHECK(*kiln::detail::jit_split_from("") == SplitMode::cost_model);
  CHECK(*kiln::detail::jit_split_from("auto") == SplitMode::cost_model);
  CHECK(*kiln::detail::jit_split_from("0") == SplitMode::off);
  CHECK(*kiln::detail::jit_split_from("1") == SplitMode::always);
  CHECK_FALSE(kiln::detail::jit_split_from("sometimes").ok());
  kiln::test::ScopedEnv always("KILN_JIT_SPLIT", "1");
  JitPool pool(fake_pool(4));
  CHECK(pool.compile(three_kernels("forced"), {}, 900, {true, 300}).entry->parts.size() == 3);
}

TEST_CASE("kernels dealt to parts: the largest first onto the least loaded part; in turn without sizes") {
  using kiln::detail::deal_kernels;
  CHECK(deal_kernels(5, 2, {}) == std::vector<std::vector<std::size_t>>{{0, 2, 4}, {1, 3}});
  CHECK(deal_kernels(4, 2, {0.1, 0.6, 0.2, 0.1}) == std::vector<std::vector<std::size_t>>{{1}, {0, 2, 3}});
  CHECK(deal_kernels(2, 4, {0.5, 0.5}).size() == 4);  // the caller asks for no more parts than kernels
}

TEST_CASE("where every compile runs in this process, a unit is compiled whole: parts would only add work") {
  JitPoolOptions options = splitting_pool(fake_pool(4));
  options.worker = "/nonexistent/kiln-jitd";
  JitPool pool(options);
  CHECK(pool.compile(fake_request("first")).entry.ok());  // finds that no worker starts
  const CompileOutcome o = pool.compile(three_kernels("u"), {}, 900, {true, 300});
  REQUIRE(o.entry.ok());
  CHECK(o.entry->parts.empty());
  CHECK(pool.stats().split_units == 0);
}

TEST_CASE("with the real kiln-jitd, a catalog unit of two kernels on the critical path compiles as parts for sm_80") {
  const kiln::Catalog& catalog = kiln::examples::catalog();
  const kiln::UnitEntry& scale = kiln::test::example_unit("scale");
  // The generator found that the unit writes no module-scope variable; a unit of one kernel is never split.
  CHECK(scale.splittable);
  CHECK_FALSE(kiln::test::example_unit("block_sum_f32").splittable);
  CHECK(catalog.find("scale_f32") != nullptr);
  const CompileRequest whole = kiln::test::example_request(scale, 80);
  REQUIRE(whole.kernels.size() == 2);
  kiln::test::TempDir dir;
  const auto trace = dir.path() / "trace.jsonl";
  std::optional<CompileOutcome> o;
  {
    kiln::test::ScopedEnv env("KILN_JIT_TRACE", trace.c_str());
    JitPool pool(splitting_pool(real_pool(2)));
    auto future = pool.submit(whole, {}, 2000, {true, 500});
    o = real_outcome(future);
    if (!o) return;
    CHECK(pool.stats().split_units == 1);
  }
  REQUIRE_MESSAGE(o->entry.ok(), o->entry.error() << "\n" << o->log);
  REQUIRE(o->entry->parts.size() == 2);
  CHECK(kiln::detail::check_entry(*o->entry, 80).ok());  // each part's cubin for sm_80 with its kernel
  for (std::size_t k = 0; k < 2; ++k) CHECK(o->entry->kernels[k].name == whole.kernels[k].name);
  const auto key = kiln::test::sample_key(1, 80);
  const auto decoded = kiln::detail::decode_entry(kiln::detail::encode_entry(key, *o->entry), key);
  REQUIRE_MESSAGE(decoded.ok(), decoded.error());
  CHECK(decoded->parts.size() == 2);
  std::ifstream in(trace);
  std::vector<std::string> parts;
  for (std::string line; std::getline(in, line);)
    if (line.find("\"part\":") != std::string::npos) parts.push_back(line);
  REQUIRE(parts.size() == 2);
  for (const char* part : {"\"part\":\"1/2\"", "\"part\":\"2/2\""})
    CHECK(std::count_if(parts.begin(), parts.end(), [&](const std::string& l) { return l.find(part) != std::string::npos; }) == 1);
  for (const auto& l : parts) CHECK(l.find("\"unit\":\"examples/scale\"") != std::string::npos);
}

TEST_SUITE_END();

TEST_CASE("a program's unit compiles in a worker with ASLR on, unless it uses the family's checked PCH") {
  kiln::test::TempDir dir;
  plant_pch(family(dir.path()).path, kiln::test::kFakePch);
  JitPool pool(fake_pool(1));
  const auto aslr = [](const CompileOutcome& o) {
    REQUIRE_MESSAGE(o.entry.ok(), o.entry.error());
    const std::size_t at = o.log.rfind("\naslr=");
    return at == std::string::npos ? std::string("?") : o.log.substr(at + 6);
  };
  const auto program = [](std::string unit) {
    CompileRequest r = fake_request(std::move(unit), {"fake:persona"});
    r.registry = "program";
    return r;
  };
  const std::string table_first = aslr(pool.compile(fake_request("t1", {"fake:persona"})));
  if (!pool.uses_pch_files()) {
    // This kernel refuses the personality: every worker runs with ASLR on, a program's too.
    MESSAGE("ASLR cannot be turned off here: only the program's side is checked");
    CHECK(aslr(pool.compile(program("p1"))) == "on");
    return;
  }
  CHECK(table_first == "off");
  CHECK(aslr(pool.compile(program("p1"))) == "on");
  CHECK(aslr(pool.compile(program("p2"))) == "on");
  // A table's unit that reads its family's PCH needs ASLR off: the program's worker is replaced.
  CompileRequest with_pch = family_request("t2", {"fake:persona"});
  const CompileOutcome used = pool.compile(std::move(with_pch), family(dir.path()));
  CHECK(used.pch == kiln::detail::PchResult::used);
  CHECK(aslr(used) == "off");
  // So does a program's that reads its family's PCH (kiln's own file, checked against its sum).
  CompileRequest program_pch = family_request("p3", {"fake:persona"});
  program_pch.registry = "program";
  const CompileOutcome program_used = pool.compile(std::move(program_pch), family(dir.path()));
  CHECK(program_used.pch == kiln::detail::PchResult::used);
  CHECK(aslr(program_used) == "off");
  CHECK(pool.uses_pch_files());  // no worker was taken for one that cannot turn ASLR off
}

TEST_CASE("a worker runs under a memory limit (KILN_JIT_MEMORY), and a compile beyond it is an error naming it") {
  if (!kiln::detail::kWorkerMemoryLimited) {
    MESSAGE("skipped: sanitized workers map terabytes of shadow memory, so they run without the limit");
    return;
  }
  const auto limit_of = [](const CompileOutcome& o) {
    REQUIRE_MESSAGE(o.entry.ok(), o.entry.error());
    const std::size_t at = o.log.rfind("\ndata_limit=");
    return at == std::string::npos ? std::string("?") : o.log.substr(at + 12);
  };
  {
    kiln::test::ScopedEnv env("KILN_JIT_MEMORY", std::nullopt);
    JitPool pool(fake_pool(1));
    CHECK(limit_of(pool.compile(fake_request("default", {"fake:data_limit"}))) ==
          std::to_string(kiln::detail::kDefaultWorkerMemory));
  }
  {
    kiln::test::ScopedEnv env("KILN_JIT_MEMORY", "0");
    JitPool pool(fake_pool(1));
    CHECK(limit_of(pool.compile(fake_request("none", {"fake:data_limit"}))) == "none");
  }
  kiln::test::ScopedEnv env("KILN_JIT_MEMORY", "1G");
  JitPool pool(fake_pool(1));
  CHECK(limit_of(pool.compile(fake_request("one", {"fake:data_limit"}))) == std::to_string(std::uint64_t{1} << 30));
  // 4 GiB asked for (never touched): refused by the limit, and the caller is told which limit.
  try {
    const CompileOutcome o = pool.compile(fake_request("greedy", {"fake:alloc=4294967296"}));
    FAIL("a compile beyond the memory limit succeeded: " << o.log);
  } catch (const kiln::Error& e) {
    INFO(e.what());
    CHECK(e.code() == kiln::Errc::compile);
    CHECK(std::string(e.what()).find("tests/greedy") != std::string::npos);
    CHECK(std::string(e.what()).find("ran out of memory") != std::string::npos);
    CHECK(std::string(e.what()).find("1 GiB: KILN_JIT_MEMORY") != std::string::npos);
  }
  CHECK(pool.stats().deaths == 0);  // the worker survived it
  CHECK(kiln::detail::jit_memory_from("lots").error().find("KILN_JIT_MEMORY='lots'") != std::string::npos);
}
