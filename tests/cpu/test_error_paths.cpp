// What reaches a caller when something fails is kiln::Error or an answer, never another exception: a thread
// the system will not start, an exception of the in-process compile, a store brought by the user that
// throws anything, a misused JSON writer. docs/DESIGN.md, "Errors (one model)".
#include <kiln/catalog.hpp>
#include <kiln/error.hpp>
#include <kiln/precompile.hpp>
#include <kiln/remote.hpp>
#include <doctest/doctest.h>

#include "base/thread_start.hpp"
#include "cli/output.hpp"
#include "examples_catalog.hpp"
#include "fake_compile.hpp"
#include "jit/pool/pool.hpp"
#include "jit/request.hpp"  // part_request
#include "own_process.hpp"
#include "text_util.hpp"

#include <chrono>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace {

using kiln::test::contains;

// Thread starts refused within a test, and allowed again after it however it ends.
struct RefusedThreadStarts {
  RefusedThreadStarts(unsigned count, unsigned after = 0) { kiln::detail::fail_thread_starts(count, after); }
  ~RefusedThreadStarts() { kiln::detail::fail_thread_starts(0); }
};

kiln::detail::CompileRequest request(std::string unit) {
  kiln::detail::CompileRequest r;
  r.registry = "tests";
  r.unit = std::move(unit);
  r.source_name = "tests." + r.unit + ".cu";
  r.source = "// the source of " + r.unit;
  r.kernels = {{"k", "k"}};
  r.expressions = {"k"};
  r.arch = 90;
  return r;
}

// A store as a user may write one: its get() throws what it is told to.
class ThrowingStore final : public kiln::RemoteStore {
 public:
  explicit ThrowingStore(int what) : what_(what) {}
  std::string where() const override { return "throwing://test"; }
  std::optional<std::string> get(const std::string&) override {
    if (what_ == 0) throw 42;  // not a std::exception
    throw std::out_of_range("the store's own exception");
  }
  kiln::RemoteReply put(const std::string&, std::string_view, std::chrono::milliseconds) override { return {}; }
  kiln::RemoteReply try_lease(const std::string&, const std::string&, std::chrono::milliseconds) override { return {}; }
  bool renew_lease(const std::string&, const std::string&, std::chrono::milliseconds) override { return true; }
  void release_lease(const std::string&, const std::string&) override {}

 private:
  int what_;
};

}  // namespace

TEST_CASE("a JIT request that no thread can be started for fails with the reason; submit throws nothing") {
  RefusedThreadStarts refused(1000);
  kiln::detail::JitPoolOptions o;
  o.workers = 2;
  o.worker = KILN_TEST_FAKE_JITD;
  o.in_process = &kiln::test::fake_compile;
  kiln::detail::JitPool pool(o);
  std::future<kiln::detail::CompileOutcome> future;
  CHECK_NOTHROW(future = pool.submit(request("alone")));
  REQUIRE(future.valid());
  REQUIRE(future.wait_for(std::chrono::seconds(30)) == std::future_status::ready);
  const kiln::detail::CompileOutcome outcome = future.get();
  CHECK_FALSE(outcome.entry.ok());
  CHECK_MESSAGE(contains(outcome.entry.error(), "no thread could be started"), outcome.entry.error());
  CHECK(contains(outcome.entry.error(), "tests/alone"));
}

TEST_CASE("an exception of the in-process compile comes back as a failed outcome naming the unit") {
  kiln::detail::JitPoolOptions o;
  o.workers = 1;
  o.worker = "/nonexistent/kiln-jitd";  // no worker: every request compiles in this process
  o.in_process = [](const kiln::detail::CompileRequest&) -> kiln::detail::CompileOutcome {
    throw std::out_of_range("vector::at");
  };
  kiln::detail::JitPool pool(o);
  kiln::detail::CompileOutcome outcome;
  CHECK_NOTHROW(outcome = pool.compile(request("here")));
  CHECK_FALSE(outcome.entry.ok());
  CHECK_MESSAGE(contains(outcome.entry.error(), "tests/here"), outcome.entry.error());
  CHECK(contains(outcome.entry.error(), "vector::at"));
  // A kiln::Error goes through as it is (no_compiler: NVRTC could not be loaded here).
  o.in_process = [](const kiln::detail::CompileRequest&) -> kiln::detail::CompileOutcome {
    throw kiln::Error(kiln::Errc::no_compiler, "no NVRTC here");
  };
  kiln::detail::JitPool other(o);
  try {
    (void)other.compile(request("there"));
    FAIL("no exception");
  } catch (const kiln::Error& e) {
    CHECK(e.code() == kiln::Errc::no_compiler);
  }
}

TEST_CASE("precompile with no thread to be had compiles on the calling thread; each refusal is a result") {
  if (!kiln::test::in_own_process("precompile with no thread to be had*")) return;
  RefusedThreadStarts refused(1000);
  std::vector<kiln::PrecompileResult> results;
  CHECK_NOTHROW(results = kiln::precompile(kiln::examples::catalog(), 86, {"vector_add", "scale_f32"}));
  REQUIRE(results.size() == 2);
  for (const kiln::PrecompileResult& r : results) {
    CAPTURE(r.unit);
    CHECK_FALSE(r.ok);
    CHECK_MESSAGE(contains(r.error.message, "no thread could be started"), r.error.message);
    CHECK(r.error.code == kiln::Errc::compile);
  }
}

TEST_CASE("precompile whose second thread is refused finishes with the threads it has") {
  if (!kiln::test::in_own_process("precompile whose second thread*")) return;
  const kiln::Catalog& catalog = kiln::examples::catalog();
  const std::vector<std::string> kernels{"vector_add", "scale_f32"};
  for (const kiln::PrecompileResult& r : kiln::precompile(catalog, 86, kernels)) REQUIRE_MESSAGE(r.ok, r.error.message);
  // All cached now: the units need no JIT thread, only precompile's own.
  RefusedThreadStarts refused(1, 1);
  const auto again = kiln::precompile(catalog, 86, kernels, 2);
  REQUIRE(again.size() == 2);
  for (const kiln::PrecompileResult& r : again) {
    CAPTURE(r.unit);
    CHECK(r.ok);
    CHECK(r.cached);
  }
}

TEST_CASE("a part of a unit that names no kernel, one twice, or one it lacks is a failed Result") {
  kiln::detail::CompileRequest whole = request("two");
  whole.kernels = {{"a", "a"}, {"b", "b"}};
  whole.expressions = {"a", "b"};
  const auto missing = kiln::detail::part_request(whole, {2});
  REQUIRE_FALSE(missing.ok());
  CHECK(contains(missing.error(), "unit two has no kernel 2"));
  const auto none = kiln::detail::part_request(whole, {});
  REQUIRE_FALSE(none.ok());
  CHECK(contains(none.error(), "names no kernel"));
  const auto twice = kiln::detail::part_request(whole, {0, 0});
  REQUIRE_FALSE(twice.ok());
  CHECK(contains(twice.error(), "names kernel 0 twice"));
  const auto part = kiln::detail::part_request(whole, {1});
  REQUIRE(part.ok());
  CHECK(part->expressions == std::vector<std::string>{"b"});
}

TEST_CASE("a store the user brings may throw anything: kiln counts it as a failure and answers a miss") {
  static_assert(std::is_base_of_v<kiln::Error, kiln::RemoteBadValue>, "a store's bad value is a kiln::Error");
  for (const int what : {0, 1}) {
    CAPTURE(what);
    kiln::RemoteConfig config;
    config.fleet_key = std::string(32, 'k');
    kiln::RemoteCache remote(std::make_unique<ThrowingStore>(what), config);
    REQUIRE(remote.usable());
    kiln::CacheKey key;
    key.hex = std::string(64, 'a');
    key.text = "format=3\n";
    std::optional<kiln::CacheEntry> loaded;
    CHECK_NOTHROW(loaded = remote.load(key));
    CHECK_FALSE(loaded.has_value());
    CHECK(remote.stats().errors == 1);
    kiln::RemotePing ping;
    CHECK_NOTHROW(ping = remote.ping());
    CHECK_FALSE(ping.ms.has_value());
    CHECK(ping.reason.code == kiln::Errc::remote);
    CHECK_MESSAGE(contains(ping.reason.message, what == 0 ? "not a std::exception" : "the store's own exception"),
                  ping.reason.message);
  }
}

TEST_CASE("the command line's JSON writer, misused, throws kiln::Error, which cli_main reports") {
  kiln::cli::Json closed;
  CHECK_THROWS_AS(closed.end(), kiln::Error);
  kiln::cli::Json open;
  open.object();
  CHECK_THROWS_AS((void)open.str(), kiln::Error);
}
