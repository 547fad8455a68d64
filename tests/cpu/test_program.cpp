// Programs given at run time, without a GPU: their key (every input changes it, no path does), found by
// content, compiled through the tiers into the disk cache and found there by a new program object.
#include <kiln/cache.hpp>
#include <kiln/catalog.hpp>
#include <kiln/error.hpp>
#include <kiln/precompile.hpp>
#include <kiln/program.hpp>
#include <kiln/record.hpp>

#include "cache_test_util.hpp"
#include "private_cache.hpp"
#include "examples_catalog.hpp"
#include "chain/entry.hpp"  // entries_path
#include "chain/key.hpp"  // sha256_hex
#include "chain/key_parts.hpp"
#include "jit/compile_history.hpp"
#include "jit/request.hpp"  // unit_estimate_ms
#include "program/program_key.hpp"  // runtime/src
#include "registry/demand_record.hpp"
#include "registry/query.hpp"
#include "remote/sealed_entry.hpp"  // kSealMagic: a value as the fleet tags it
#include "remote_test_util.hpp"
#include "run_process.hpp"
#include "text_util.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <thread>

namespace {

const char* kSaxpy = R"(
#include "axpy/scale.cuh"
template <typename T>
__global__ void axpy(T a, const T* x, T* y, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = axpy_scale(a) * x[i] + y[i];
}
extern "C" __global__ void fill(float* y, float v, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = v;
}
)";

kiln::ProgramSource saxpy() {
  kiln::ProgramSource s;
  s.source = kSaxpy;
  s.headers = {{"axpy/scale.cuh", "template <typename T> __device__ T axpy_scale(T a) { return a; }\n"}};
  s.options = {"-std=c++17", "-DAXPY=1"};
  s.name_expressions = {"axpy<float>", "fill"};
  s.label = "tests/saxpy";
  return s;
}

void write(const std::filesystem::path& path, const std::string& text) { kiln::test::write_file(path, text); }

using kiln::test::contains;

using kiln::test::PrivateCache;  // private_cache.hpp

}  // namespace

TEST_CASE("a program's digest changes with every input, and not with its label or an include directory's path") {
  const std::string base = kiln::detail::program_digest(saxpy());
  CHECK(base.size() == 64);
  auto changed = [&](auto edit) {
    kiln::ProgramSource s = saxpy();
    edit(s);
    return kiln::detail::program_digest(s) != base;
  };
  CHECK(changed([](auto& s) { s.source += " "; }));
  CHECK(changed([](auto& s) { s.headers[0].source += "\n"; }));
  CHECK(changed([](auto& s) { s.headers[0].name = "axpy/other.cuh"; }));
  CHECK(changed([](auto& s) { s.options[1] = "-DAXPY=2"; }));
  CHECK(changed([](auto& s) { s.options.push_back("--use_fast_math"); }));
  CHECK(changed([](auto& s) { s.name_expressions[0] = "axpy<double>"; }));
  CHECK_FALSE(changed([](auto& s) { s.label = "another label"; }));

  // Two copies of one include directory, at different paths: one digest. An edited header: another.
  kiln::test::TempDir tmp;
  for (const char* copy : {"a", "b"}) {
    write(tmp.path() / copy / "inc" / "axpy" / "extra.cuh", "#define EXTRA 1\n");
    write(tmp.path() / copy / "inc" / "top.cuh", "#include \"axpy/extra.cuh\"\n");
  }
  auto with_dir = [&](const char* copy, bool joined) {
    kiln::ProgramSource s = saxpy();
    const std::string dir = (tmp.path() / copy / "inc").string();
    if (joined) {
      s.options.push_back("-I" + dir);
    } else {
      s.options.push_back("--include-path");
      s.options.push_back(dir);
    }
    return kiln::detail::program_digest(s);
  };
  const std::string in_a = with_dir("a", true);
  CHECK(in_a != base);
  CHECK(with_dir("b", true) == in_a);
  CHECK(with_dir("b", false) != base);
  write(tmp.path() / "b" / "inc" / "axpy" / "extra.cuh", "#define EXTRA 2\n");
  CHECK(with_dir("b", true) != in_a);

  kiln::ProgramSource missing = saxpy();
  missing.options.push_back("-I" + (tmp.path() / "nowhere").string());
  try {
    (void)kiln::detail::program_digest(missing);
    FAIL("an include directory that does not exist was taken");
  } catch (const kiln::Error& e) {
    CHECK(e.code() == kiln::Errc::invalid_argument);
    CHECK(contains(e.what(), "tests/saxpy"));
  }
}

TEST_CASE("a program is found by its content: the same text is the same program, other options another") {
  const auto first = kiln::program(saxpy());
  kiln::ProgramSource again = saxpy();
  again.label = "the same text, handed in again";
  CHECK(kiln::program(again) == first);
  kiln::ProgramSource other = saxpy();
  other.options.push_back("-DOTHER");
  CHECK(kiln::program(other) != first);
  kiln::RegistryOptions no_jit;
  no_jit.use_jit = false;
  CHECK(kiln::program(saxpy(), 0, no_jit) != first);
  CHECK(first->digest() == kiln::detail::program_digest(saxpy()));
  // Its key names the architecture and no path; the label stays out of it.
  kiln::test::TempDir tmp;
  kiln::DiskCache cache(kiln::test::config_at(tmp.path() / "kiln"));
  const kiln::Catalog& c = first->catalog();
  const auto k90 = kiln::detail::unit_cache_key(c, c.units[0], 90, cache);
  CHECK(k90.hex != kiln::detail::unit_cache_key(c, c.units[0], 80, cache).hex);
  CHECK_FALSE(contains(k90.text, "tests/saxpy"));
  CHECK_FALSE(contains(k90.text, tmp.path().string()));
  CHECK(contains(k90.text, "registry=program"));
}

TEST_CASE("a program compiles through the tiers into the disk cache, and a new program object finds it there") {
  const PrivateCache here;
  kiln::DiskCache& cache = *here.cache;
  const kiln::RegistryOptions& options = here.options;
  kiln::Program cold(saxpy(), 0, options);
  const kiln::PrecompileResult first = cold.precompile(80);
  CHECK(first.ok);
  CHECK(first.compiled);
  // The entry records NVRTC's lowered names: the template's is mangled, the extern "C" one is not.
  const kiln::Catalog& c = cold.catalog();
  const auto entry = cache.load(kiln::detail::unit_cache_key(c, c.units[0], 80, cache));
  REQUIRE(entry.has_value());
  REQUIRE(entry->kernels.size() == 2);
  for (const kiln::CachedKernel& k : entry->kernels) {
    if (k.name == "fill") CHECK(k.lowered == "fill");
    if (k.name == "axpy<float>") CHECK(k.lowered.starts_with("_Z"));
  }
  kiln::Program warm(saxpy(), 0, options);
  const kiln::PrecompileResult second = warm.precompile(80);
  CHECK(second.ok);
  CHECK(second.cached);
  CHECK_FALSE(second.compiled);
}

TEST_CASE("a program is a unit source: its text and headers stay as given, its catalog only names its kernels") {
  const PrivateCache here;
  kiln::Program program(saxpy(), 0, here.options);
  // No header bundle to pack and unpack, no second copy of its text in its catalog.
  const kiln::Catalog& c = program.catalog();
  CHECK(c.header_bundle == nullptr);
  CHECK(c.headers.empty());
  CHECK(c.str(c.units[0].source).empty());
  CHECK(c.kernels.size() == 2);
  // Its in-memory header reaches NVRTC, and the key parts its entry records are the unit source's.
  REQUIRE(program.precompile(80).compiled);
  const auto entry = here.cache->load(kiln::detail::unit_cache_key(c, c.units[0], 80, *here.cache));
  REQUIRE(entry.has_value());
  const auto parts = kiln::detail::recorded_key_parts(*entry);
  REQUIRE(parts.has_value());
  bool header = false;
  for (const kiln::detail::KeyPart& part : *parts) header = header || part.name == "header axpy/scale.cuh";
  CHECK(header);
}

TEST_CASE("a program that does not compile is an error carrying its label and NVRTC's log") {
  const PrivateCache here;
  const kiln::RegistryOptions& options = here.options;
  kiln::ProgramSource broken = saxpy();
  broken.source += "\n__global__ void oops() { undeclared_thing(); }\n";
  broken.label = "tests/broken";
  kiln::Program program(broken, 0, options);
  try {
    (void)program.precompile(80);
    FAIL("a program that does not compile compiled");
  } catch (const kiln::Error& e) {
    CHECK(e.code() == kiln::Errc::compile);
    CHECK(contains(e.what(), "tests/broken"));
    CHECK(contains(e.what(), "undeclared_thing"));
  }
  kiln::ProgramSource none = saxpy();
  none.name_expressions.clear();
  CHECK_THROWS_AS(kiln::Program(none, 0, options), kiln::Error);
}

TEST_CASE("a demand record: written once per program and kernel, read back, and precompiled for another arch") {
  kiln::test::TempDir tmp;
  const std::string path = (tmp.path() / "demand.record").string();
  kiln::record_demand(path);
  kiln::ProgramSource with_bytes = saxpy();
  with_bytes.source += "\n/* a line break \n and \\ and \x01 survive */\n";
  kiln::detail::UnitSource unit;  // as the program makes it, the toolkit's -I aside
  unit.source = with_bytes.source;
  for (const kiln::ProgramHeader& h : with_bytes.headers) unit.headers.push_back({h.name, h.source});
  unit.options = with_bytes.options;
  unit.expressions = with_bytes.name_expressions;
  kiln::detail::record_program(with_bytes.label, unit, with_bytes.options);
  kiln::detail::record_program(with_bytes.label, unit, with_bytes.options);  // once per process
  kiln::detail::record_kernel("examples", "vector_add", 80);
  kiln::detail::record_kernel("elsewhere", "nothing", 80);
  const kiln::DemandRecord record = kiln::read_record(path);
  REQUIRE(record.programs.size() == 1);
  CHECK(record.programs[0].source == with_bytes.source);
  CHECK(record.programs[0].headers.size() == 1);
  CHECK(record.programs[0].headers[0].source == with_bytes.headers[0].source);
  CHECK(record.programs[0].options == with_bytes.options);
  CHECK(record.programs[0].name_expressions == with_bytes.name_expressions);
  CHECK(record.programs[0].label == "tests/saxpy");
  REQUIRE(record.kernels.size() == 2);
  CHECK(record.kernels[0].registry == "examples");
  CHECK(record.kernels[0].arch == 80);
  CHECK(std::filesystem::status(path).permissions() == std::filesystem::perms(0600));

  // Replayed for sm_86 into a cache of its own, without a GPU: the program and the table's kernel
  // compiled; the registry this program lacks is named.
  kiln::test::ScopedEnv dir("KILN_CACHE_DIR", (tmp.path() / "cache").string());
  const auto results = kiln::precompile_record(record, 86, {&kiln::examples::catalog()});
  REQUIRE(results.size() == 3);
  std::size_t ok = 0;
  for (const auto& r : results) {
    ok += r.ok;
    if (!r.ok) CHECK_MESSAGE(contains(r.error.message, "elsewhere"), std::string(r.unit + ": " + r.error.message));
  }
  CHECK(ok == 2);

  // Not a record: the file and line are named.
  write(tmp.path() / "bad.record", "kiln record 1\nprogram\nlabel 99\nshort\n");
  try {
    (void)kiln::read_record((tmp.path() / "bad.record").string());
    FAIL("a damaged record was read");
  } catch (const kiln::Error& e) {
    CHECK(e.code() == kiln::Errc::invalid_argument);
    CHECK_MESSAGE(contains(e.what(), "bad.record:3"), std::string(e.what()));
  }
  // Recording to what is not a regular file is refused.
  CHECK_THROWS_AS(kiln::record_demand(tmp.path().string()), kiln::Error);
}

TEST_CASE("concurrent first compiles of one program compile it once") {
  const PrivateCache here;
  kiln::DiskCache& cache = *here.cache;
  const kiln::RegistryOptions& options = here.options;
  kiln::ProgramSource source = saxpy();
  source.source += "\n// concurrent\n";
  constexpr int kThreads = 6;
  std::vector<kiln::PrecompileResult> results(kThreads);
  {
    std::vector<std::thread> threads;
    for (int i = 0; i < kThreads; ++i)
      threads.emplace_back([&, i] { results[i] = kiln::Program(source, 0, options).precompile(90); });
    for (auto& t : threads) t.join();
  }
  int compiled = 0;
  for (const auto& r : results) {
    CHECK(r.ok);
    compiled += r.compiled;
  }
  CHECK(compiled == 1);
  CHECK(cache.stats().stores == 1);
}

#ifdef KILN_TEST_CLI
TEST_CASE("processes sharing a cache directory that ask for one new program at once compile it once") {
  // Each process is the kiln command compiling the program from a record (Program::precompile), for an
  // architecture without a GPU; each traces its JIT pool, whose request lines are its compiles.
  kiln::test::TempDir tmp;
  const auto record = tmp.path() / "demand.record";
  {
    std::string text = "kiln record 1\nprogram\n";
    const kiln::ProgramSource s = saxpy();
    kiln::detail::append_field(text, "label", "tests/shared");
    kiln::detail::append_field(text, "source", s.source + "\n// asked for by several processes\n");
    kiln::detail::append_field(text, "header", s.headers[0].name);
    kiln::detail::append_field(text, "bytes", s.headers[0].source);
    for (const std::string& o : s.options) kiln::detail::append_field(text, "option", o);
    for (const std::string& e : s.name_expressions) kiln::detail::append_field(text, "kernel", e);
    write(record, text + "end\n");
  }
  constexpr int kProcesses = 3;
  std::vector<kiln::test::ProcessResult> results(kProcesses);
  {
    std::vector<std::thread> threads;
    for (int p = 0; p < kProcesses; ++p)
      threads.emplace_back([&, p] {
        results[p] = kiln::test::run_process(
            {KILN_TEST_CLI, "precompile", "--record", record.string(), "--arch", "sm_86"},
            {{"KILN_CACHE_DIR", (tmp.path() / "cache").string()}, {"KILN_CACHE", std::nullopt},
             {"KILN_REMOTE_CACHE", std::nullopt}, {"KILN_RECORD", std::nullopt},
             {"KILN_JIT_TRACE", (tmp.path() / ("trace-" + std::to_string(p))).string()}},
            std::chrono::seconds(180));
      });
    for (auto& t : threads) t.join();
  }
  int compiled = 0, cached = 0, requests = 0;
  for (int p = 0; p < kProcesses; ++p) {
    CAPTURE(results[p].output);
    CHECK(results[p].status == 0);
    compiled += contains(results[p].output, "compiled and cached  tests/shared");
    cached += contains(results[p].output, "already cached  tests/shared");
    const std::filesystem::path trace = tmp.path() / ("trace-" + std::to_string(p));
    if (std::filesystem::exists(trace)) {
      const std::string lines = kiln::test::read_bytes(trace);
      for (std::size_t at = lines.find("\"event\":\"request\""); at != std::string::npos;
           at = lines.find("\"event\":\"request\"", at + 1))
        ++requests;
    }
  }
  CHECK(compiled == 1);
  CHECK(cached == kProcesses - 1);
  CHECK(requests == 1);
  CHECK(kiln::test::files_in(kiln::test::entries_dir(tmp.path() / "cache"), ".kiln").size() == 1);
}
#endif

TEST_CASE("a program that includes a header from its -I directory is compiled as a unit with headers") {
  // Its headers are on disk, not in memory: it must not be taken for a unit that includes nothing (tried
  // with -minimal first, and kept as NVRTC's own cubin with every unreferenced global of its headers).
  const PrivateCache here;
  write(here.tmp.path() / "inc" / "twice.cuh", "__device__ inline float twice(float v) { return v + v; }\n");
  kiln::ProgramSource s;
  s.source = "#include \"twice.cuh\"\nextern \"C\" __global__ void doubled(float* x) { x[0] = twice(x[0]); }\n";
  s.options = {"-I" + (here.tmp.path() / "inc").string()};
  s.name_expressions = {"doubled"};
  s.label = "tests/included";
  kiln::Program program(s, 0, here.options);
  REQUIRE(program.precompile(80).compiled);
  const kiln::Catalog& c = program.catalog();
  const auto entry = here.cache->load(kiln::detail::unit_cache_key(c, c.units[0], 80, *here.cache));
  REQUIRE(entry.has_value());
  CAPTURE(entry->compiler);
  CHECK(contains(entry->compiler, "nvjitlink"));
  CHECK_FALSE(contains(entry->compiler, "its own cubin"));
}

TEST_CASE("a program compiled on one machine is published to the fleet, HMAC-tagged, and fetched by another") {
  KILN_SKIP_WITHOUT_REDIS();
  auto& server = kiln::test::fresh_shared_redis();
  kiln::test::RedisClient redis(server.port());
  kiln::ProgramSource source = saxpy();
  source.source += "\n// shared by a fleet\n";
  // Two machines: each its own disk cache, one remote cache.
  struct Machine {
    PrivateCache disk;
    std::unique_ptr<kiln::RemoteCache> remote;
    kiln::RegistryOptions options;
    explicit Machine(const std::string& url, const std::string& fleet_key = kiln::test::kFleetKey)
        : remote(kiln::test::remote_at(url, fleet_key)), options(disk.options) {
      options.remote = remote.get();
      options.use_remote = true;
    }
  };
  Machine a(server.url()), b(server.url());
  kiln::Program on_a(source, 0, a.options);
  const kiln::PrecompileResult built = on_a.precompile(80);
  CHECK(built.ok);
  CHECK(built.compiled);
  CHECK_FALSE(built.from_remote);
  CHECK(a.remote->stats().stores == 1);
  const kiln::Catalog& c = on_a.catalog();
  const kiln::CacheKey key = kiln::detail::unit_cache_key(c, c.units[0], 80, *a.disk.cache);
  // In the store under its key, sealed with the fleet key's tag: the entry file as the disk keeps it.
  const std::string value = redis.command({"GET", kiln::test::entry_name(key.hex)});
  CHECK(value.starts_with(kiln::detail::kSealMagic));
  CHECK(value.ends_with(kiln::test::read_bytes(kiln::test::entry_path(a.disk.tmp.path() / "kiln", key))));

  // The second machine, its directory empty: fetched, verified, kept on its disk; nothing compiled.
  kiln::Program on_b(source, 0, b.options);
  CHECK(kiln::detail::unit_cache_key(on_b.catalog(), on_b.catalog().units[0], 80, *b.disk.cache).hex == key.hex);
  CHECK(b.disk.cache->stats().entries == 0);
  const kiln::PrecompileResult fetched = on_b.precompile(80);
  CHECK(fetched.ok);
  CHECK(fetched.from_remote);
  CHECK_FALSE(fetched.compiled);
  CHECK(b.remote->stats().hits == 1);
  CHECK(b.remote->stats().rejected == 0);
  CHECK(b.disk.cache->contains(key));
  CHECK(on_b.precompile(80).cached);  // now from its own disk
  CHECK(b.remote->stats().hits == 1);

  // A machine of another fleet (another key) is not served this fleet's entry: it compiles its own.
  Machine other(server.url(), "another fleet's key, of enough bytes");
  const kiln::PrecompileResult own = kiln::Program(source, 0, other.options).precompile(80);
  CHECK(own.compiled);
  CHECK_FALSE(own.from_remote);
  CHECK(other.remote->stats().hits == 0);
}

TEST_CASE("a program's estimate follows its size, then the compile time its cache directory measured") {
  const PrivateCache here;
  const std::filesystem::path root = here.cache->config().dir;
  kiln::ProgramSource large = saxpy();
  for (int i = 0; i < 400; ++i)
    large.source += "__device__ float pad" + std::to_string(i) + "(float x) { return x * " + std::to_string(i) + ".0f + 1.0f; }\n";
  kiln::Program small_program(saxpy(), 0, here.options), large_program(large, 0, here.options);
  const double small_estimate = small_program.estimate_ms();
  const double large_estimate = large_program.estimate_ms();
  CHECK(small_estimate > 40);  // more than the fixed cost alone: its source and headers count
  CHECK(large_estimate > small_estimate + 200);  // ~25 KiB more source
  CHECK_FALSE(kiln::detail::compile_history(root).lookup(small_program.digest()).has_value());
  // What it includes from an -I directory is parsed on every compile: it counts too.
  kiln::test::TempDir inc;
  write(inc.path() / "wide" / "defs.cuh", std::string(1 << 20, ' '));
  kiln::ProgramSource including = saxpy();
  including.source = "#include <wide/defs.cuh>\n" + including.source;
  including.options.push_back("-I" + inc.path().string());
  const kiln::Program including_program(including, 0, here.options);
  CHECK(including_program.estimate_ms() > small_estimate + 40);  // 50 ms per MiB

  REQUIRE(small_program.precompile(80).compiled);
  const auto measured = kiln::detail::compile_history(root).lookup(small_program.digest());
  REQUIRE(measured.has_value());
  CHECK(*measured > 0);
  CHECK(small_program.estimate_ms() == doctest::Approx(*measured));
  // Kept in the cache directory: another process (a history object of its own) reads it, for any
  // architecture (the digest leaves the architecture out).
  kiln::detail::CompileHistory again(kiln::detail::entries_path(root));
  CHECK(again.lookup(small_program.digest()) == doctest::Approx(*measured).epsilon(0.01));
  // And with the entry, for `kiln cache list` and `kiln why`.
  const kiln::Catalog& c = small_program.catalog();
  const auto entry = here.cache->load(kiln::detail::unit_cache_key(c, c.units[0], 80, *here.cache));
  REQUIRE(entry.has_value());
  const auto recorded = kiln::detail::recorded_compile_ms(*entry);
  REQUIRE(recorded.has_value());
  CHECK(*recorded == doctest::Approx(*measured).epsilon(0.05));
  CHECK(kiln::detail::recorded_key_parts(*entry).has_value());  // the key parts are still read after it
}

TEST_CASE("the compile history: later lines win, malformed ones are skipped, and the file stays bounded") {
  using kiln::detail::CompileHistory;
  const std::string a(64, 'a'), b(64, 'b');
  const auto parsed = CompileHistory::parse(a + " 10\n" + b + " 20.5\n" + a + " 30\nnot a digest 5\n" + b +
                                            " -1\n" + std::string(64, 'C') + " 7\n" + a + " 12x\n");
  REQUIRE(parsed.size() == 2);
  CHECK(parsed.at(a) == 30);
  CHECK(parsed.at(b) == 20.5);

  kiln::test::TempDir tmp;
  {
    CompileHistory history(tmp.path());
    history.record("not-a-digest", 5);  // ignored
    for (int i = 0; i < 6000; ++i) {
      std::string digest = kiln::detail::sha256_hex(std::to_string(i));
      history.record(digest, 100 + i);
    }
  }
  const auto size = std::filesystem::file_size(tmp.path() / CompileHistory::kFileName);
  CHECK(size <= CompileHistory::kMaxBytes);
  CompileHistory reread(tmp.path());
  CHECK(reread.lookup(kiln::detail::sha256_hex("5999")) == doctest::Approx(6099).epsilon(0.001));  // the latest kept
  CHECK((std::filesystem::status(tmp.path() / CompileHistory::kFileName).permissions() & std::filesystem::perms::others_read) ==
        std::filesystem::perms::none);
}
