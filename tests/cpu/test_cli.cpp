// The kiln command says what happened and exits non-zero when the asked-for result was not achieved; it
// refuses arguments it does not understand. Runs the real `kiln` binary; precompile runs real NVRTC.
#include <kiln/cache.hpp>
#include <doctest/doctest.h>

#include "cli_test_util.hpp"
#include "remote_test_util.hpp"  // a real redis-server for cache push

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#ifdef KILN_TEST_CLI

using kiln::test::entries;
using kiln::test::kiln_cli;
using kiln::test::ProcessResult;
using kiln::test::says;
using Env = kiln::test::Env;

TEST_CASE("kiln precompile of a kernel no registry has fails and names it") {
  kiln::test::TempDir tmp;
  const auto r = kiln_cli({"precompile", "--arch", "sm_86", "no_such_kernel"}, tmp.path());
  CAPTURE(r.output);
  CHECK(r.status != 0);
  CHECK(says(r, "no_such_kernel"));
}

TEST_CASE("kiln precompile --record compiles what a run recorded, for each --arch, without a GPU") {
  kiln::test::TempDir tmp;
  const auto record = tmp.path() / "demand.record";
  // A record as the runtime writes it (KILN_RECORD): a program given at run time and a table's kernel.
  const std::string source = "extern \"C\" __global__ void twice(float* x) { x[threadIdx.x] *= 2; }\n";
  const auto field = kiln::test::record_field;
  std::ofstream(record) << "kiln record 1\nprogram\n" << field("label", "cli/twice") << field("source", source)
                        << field("kernel", "twice") << "end\ntable\n" << field("registry", "examples")
                        << field("kernel", "vector_add") << "arch 86\nend\n";
  const auto r = kiln_cli({"precompile", "--record", record.string(), "--arch", "sm_86"}, tmp.path());
  CAPTURE(r.output);
  CHECK(r.status == 0);
  CHECK(says(r, "compiled and cached  cli/twice"));
  CHECK(says(r, "compiled and cached  vector_add"));
  CHECK(says(r, ": 2 in the cache, 0 not"));
  CHECK(entries(tmp.path()) == 2);
  // Without --arch, or with kernel names beside it: refused.
  CHECK(kiln_cli({"precompile", "--record", record.string()}, tmp.path()).status == 2);
  CHECK(kiln_cli({"precompile", "--record", record.string(), "--arch", "sm_86", "vector_add"}, tmp.path()).status == 2);
  // What is not a record: named, non-zero.
  std::ofstream(tmp.path() / "junk") << "not a record\n";
  const auto junk = kiln_cli({"precompile", "--record", (tmp.path() / "junk").string(), "--arch", "sm_86"}, tmp.path());
  CHECK(junk.status != 0);
  CHECK(says(junk, "junk:1"));
}

TEST_CASE("kiln precompile compiles every registry at once, naming each unit with its registry; with --jobs, one after another") {
  kiln::test::TempDir tmp;
  // A unit of kiln's primitives and one of the examples: two registries, when this build has primitives.
  const auto r = kiln_cli({"precompile", "--arch", "sm_80", "vector_add", "lower_bound_i32_for_each"}, tmp.path());
  CAPTURE(r.output);
  if (r.status == 2 && says(r, "no kernel 'lower_bound_i32_for_each'")) {
    MESSAGE("skipped: this build has no primitives, so the kiln command has one registry");
    return;
  }
  CHECK(r.status == 0);
  // Both registries start before either reports a unit (before, the second started once the first was done).
  const auto first_unit = r.output.find("compiled and cached");
  CHECK(r.output.find("registry examples: compiling for sm_80\n") < first_unit);
  CHECK(r.output.find("registry primitives: compiling for sm_80\n") < first_unit);
  CHECK(says(r, "compiled and cached  examples.vector_add  "));
  CHECK(says(r, "compiled and cached  primitives.lower_bound_i32  "));
  CHECK(says(r, "registry examples, sm_80: 1 compiled and cached, 0 already cached"));
  CHECK(says(r, "registry primitives, sm_80: 1 compiled and cached, 0 already cached"));
  CHECK(entries(tmp.path()) == 2);

  const auto bounded = kiln_cli({"precompile", "--arch", "sm_80", "--jobs", "1", "vector_add", "lower_bound_i32_for_each"},
                                tmp.path());
  CAPTURE(bounded.output);
  CHECK(bounded.status == 0);
  CHECK(says(bounded, "registry examples: compiling for sm_80\nalready cached  vector_add  "));
  CHECK(says(bounded, "registry primitives: compiling for sm_80\nalready cached  lower_bound_i32  "));
}

TEST_CASE("kiln precompile says per unit whether the cache kept it, and fails when it did not") {
  kiln::test::TempDir tmp;
  SUBCASE("a cap smaller than the entry") {
    for (const char* cap : {"1", "100"}) {
      CAPTURE(std::string(cap));
      const auto r = kiln_cli({"precompile", "--arch", "sm_80", "vector_add"}, tmp.path(), {{"KILN_CACHE_MAX_BYTES", cap}});
      CAPTURE(r.output);
      CHECK(r.status == 1);
      CHECK(says(r, "compiled, not cached"));
      CHECK(says(r, "KILN_CACHE_MAX_BYTES"));
      CHECK(entries(tmp.path()) == 0);
    }
  }
  SUBCASE("a cap that holds one unit of two: the one evicted is not cached, and the command fails") {
    // Each stored entry pruned the cache to the cap, evicting the unit stored before it; the command
    // used to count both as cached and exit 0.
    const auto r = kiln_cli({"precompile", "--arch", "sm_80", "vector_add", "scale_f32"}, tmp.path(),
                            {{"KILN_CACHE_MAX_BYTES", "2000"}});
    CAPTURE(r.output);
    CHECK(r.status == 1);
    CHECK(says(r, "evicted  "));
    CHECK(says(r, "KILN_CACHE_MAX_BYTES"));
    REQUIRE(entries(tmp.path()) == 1);  // each entry fits the cap alone
    // Again: the unit kept is already cached, then evicted by the other one's store. It is counted as
    // that, not as compiled (it used to be "1 compiled but not cached").
    const auto again = kiln_cli({"precompile", "--arch", "sm_80", "vector_add", "scale_f32"}, tmp.path(),
                                {{"KILN_CACHE_MAX_BYTES", "2000"}});
    CAPTURE(again.output);
    CHECK(again.status == 1);
    CHECK(says(again, "the disk cache had it, then evicted it for the units stored after it"));
    CHECK(says(again, ": 1 compiled and cached, 0 already cached, 0 compiled but not cached, 0 failed, "
                      "1 already cached but gone since\n"));
  }
  SUBCASE("a cap of 0 is no cap") {
    const auto r = kiln_cli({"precompile", "--arch", "sm_80", "vector_add"}, tmp.path(), {{"KILN_CACHE_MAX_BYTES", "0"}});
    CAPTURE(r.output);
    CHECK(r.status == 0);
    CHECK(says(r, "compiled and cached"));
    CHECK(entries(tmp.path()) == 1);
    const auto again = kiln_cli({"precompile", "--arch", "sm_80", "vector_add"}, tmp.path());
    CAPTURE(again.output);
    CHECK(again.status == 0);
    CHECK(says(again, "already cached"));
  }
  SUBCASE("a read-only cache") {
    { kiln::DiskCache make(kiln::test::config_at(tmp.path())); }
    const auto r = kiln_cli({"precompile", "--arch", "sm_80", "vector_add"}, tmp.path(), {}, [&] {
      // As root modes do not count: hand the tree to nobody and become nobody first.
      return kiln::test::become_owner_of_as_nobody(tmp.path()) &&
             ::chmod(kiln::test::entries_dir(tmp.path()).c_str(), 0500) == 0;
    });
    CAPTURE(r.output);
    CHECK(r.status == 1);
    CHECK(says(r, "compiled, not cached"));
    CHECK(entries(tmp.path()) == 0);
  }
}

TEST_CASE("kiln cache export and push of a registry the program does not have exit 2 and write nothing") {
  kiln::test::TempDir tmp;
  const auto pack = tmp.path() / "x.kpack";
  for (const std::vector<std::string>& args : {std::vector<std::string>{"cache", "export", "--registry", "nosuch", pack.string()},
                                              std::vector<std::string>{"cache", "push", "--registry", "nosuch"}}) {
    const auto r = kiln_cli(args, tmp.path() / "cache", {{"KILN_REMOTE_CACHE", "redis://127.0.0.1:1/0"},
                                                        {"KILN_REMOTE_KEY", "a fleet key of enough bytes"}});
    CAPTURE(r.output);
    CHECK(r.status == 2);
    CHECK(says(r, "no registry 'nosuch' (registries: examples"));
  }
  CHECK_FALSE(std::filesystem::exists(pack));
  // A registry it has: exit 0, even with nothing to export.
  const auto ok = kiln_cli({"cache", "export", "--registry", "examples", pack.string()}, tmp.path() / "cache");
  CAPTURE(ok.output);
  CHECK(ok.status == 0);
}

TEST_CASE("kiln cache export and push --registry program share programs' entries; stats and verify count them") {
  KILN_SKIP_WITHOUT_REDIS();
  auto& server = kiln::test::fresh_shared_redis();
  kiln::test::TempDir tmp;
  const auto record = tmp.path() / "demand.record";
  const std::string source = "extern \"C\" __global__ void thrice(float* x) { x[threadIdx.x] *= 3; }\n";
  const auto field = kiln::test::record_field;
  std::ofstream(record) << "kiln record 1\nprogram\n" << field("label", "cli/thrice") << field("source", source)
                        << field("kernel", "thrice") << "end\n";
  const Env fleet{{"KILN_REMOTE_CACHE", server.url()}, {"KILN_REMOTE_KEY", kiln::test::kFleetKey}};
  const Env off{{"KILN_REMOTE_CACHE", std::nullopt}};
  const auto a = tmp.path() / "a";
  const auto built = kiln_cli({"precompile", "--record", record.string(), "--arch", "sm_86"}, a, off);
  CAPTURE(built.output);
  REQUIRE(built.status == 0);
  CHECK(says(built, "compiled and cached  cli/thrice"));
  // The program's entry is counted and checked as a table's is.
  const auto stats = kiln_cli({"cache", "stats"}, a, off);
  CAPTURE(stats.output);
  CHECK(says(stats, "1 entry"));
  const auto verify = kiln_cli({"cache", "verify"}, a, off);
  CAPTURE(verify.output);
  CHECK(verify.status == 0);
  CHECK(says(verify, "checked 1 file, removed 0"));

  // Exported as the registry `program`, and imported into another cache, where it is already there.
  const auto pack = tmp.path() / "programs.kpack";
  const auto exported = kiln_cli({"cache", "export", "--registry", "program", "--arch", "sm_86", pack.string()}, a, off);
  CAPTURE(exported.output);
  CHECK(exported.status == 0);
  CHECK(says(exported, "exported 1 entry of registry program for sm_86"));
  const auto b = tmp.path() / "b";
  const auto imported = kiln_cli({"cache", "import", pack.string()}, b, off);
  CAPTURE(imported.output);
  CHECK(imported.status == 0);
  CHECK(says(imported, "1 new"));
  const auto from_pack = kiln_cli({"precompile", "--record", record.string(), "--arch", "sm_86"}, b, off);
  CAPTURE(from_pack.output);
  CHECK(says(from_pack, "already cached  cli/thrice"));
  // The table's registry has none of it.
  const auto none = kiln_cli({"cache", "export", "--registry", "examples", (tmp.path() / "none.kpack").string()}, a, off);
  CHECK(says(none, "exported 0 entries of registry examples"));

  // Pushed to the fleet, and fetched by a machine with an empty cache: no compile there.
  const auto pushed = kiln_cli({"cache", "push", "--registry", "program"}, a, fleet);
  CAPTURE(pushed.output);
  CHECK(pushed.status == 0);
  CHECK(says(pushed, "pushed 1 entry of registry program to "));
  const auto c = tmp.path() / "c";
  const auto fetched = kiln_cli({"precompile", "--record", record.string(), "--arch", "sm_86"}, c, fleet);
  CAPTURE(fetched.output);
  CHECK(fetched.status == 0);
  CHECK(says(fetched, "fetched from the fleet  cli/thrice"));
  CHECK(entries(c) == 1);
}

TEST_CASE("kiln status without a GPU warms nothing, and says so with a non-zero exit") {
  kiln::test::TempDir tmp;
  const auto r = kiln_cli({"status"}, tmp.path(), {{"CUDA_VISIBLE_DEVICES", ""}});
  CAPTURE(r.output);
  CHECK(r.status == 1);
  CHECK(says(r, "status: nothing was warmed: no GPU here; `"));
  CHECK(says(r, " precompile --arch sm_XX` fills the disk cache without one"));
}

TEST_CASE("kiln info and status say what KILN_DEVICE_ARCH overrides, with or without a GPU") {
  kiln::test::TempDir tmp;
  for (const char* command : {"info", "status"}) {
    CAPTURE(command);
    const auto r = kiln_cli({command}, tmp.path(), {{"CUDA_VISIBLE_DEVICES", ""}, {"KILN_DEVICE_ARCH", "1:80,2:sm_86"}});
    CAPTURE(r.output);
    CHECK(r.status == (std::string(command) == "info" ? 0 : 1));  // as without it: status warmed nothing
    CHECK(says(r, "KILN_DEVICE_ARCH=1:80,2:sm_86: device 1 takes sm_80's binaries, device 2 takes sm_86's binaries"));
    const auto bad = kiln_cli({command}, tmp.path(), {{"CUDA_VISIBLE_DEVICES", ""}, {"KILN_DEVICE_ARCH", "one:80"}});
    CAPTURE(bad.output);
    CHECK(says(bad, "KILN_DEVICE_ARCH=one:80: not a list of DEVICE:ARCH (1:80,2:sm_86); ignored"));
    const auto twice = kiln_cli({command}, tmp.path(), {{"CUDA_VISIBLE_DEVICES", ""}, {"KILN_DEVICE_ARCH", "0:80,0:90"}});
    CAPTURE(twice.output);
    CHECK(says(twice, "KILN_DEVICE_ARCH=0:80,0:90: device 0 is named twice; ignored"));
  }
  const auto plain = kiln_cli({"info"}, tmp.path(), {{"CUDA_VISIBLE_DEVICES", ""}, {"KILN_DEVICE_ARCH", std::nullopt}});
  CHECK_FALSE(says(plain, "KILN_DEVICE_ARCH"));
}

TEST_CASE("kiln precompile compiles each --arch given; cache export refuses a second one") {
  kiln::test::TempDir tmp;
  const auto r = kiln_cli({"precompile", "--arch", "sm_80", "--arch", "sm_86", "--arch", "sm_80", "vector_add"}, tmp.path());
  CAPTURE(r.output);
  CHECK(r.status == 0);
  CHECK(says(r, "registry examples, sm_80: 1 compiled and cached"));
  CHECK(says(r, "registry examples, sm_86: 1 compiled and cached"));
  CHECK(entries(tmp.path()) == 2);
  const auto e = kiln_cli({"cache", "export", "--arch", "sm_80", "--arch", "sm_86", (tmp.path() / "x.kpack").string()}, tmp.path());
  CAPTURE(e.output);
  CHECK(e.status == 2);
  CHECK(says(e, "one --arch at a time"));
}

TEST_CASE("kiln cache prune takes a size as KILN_CACHE_MAX_BYTES does, and refuses what is not one") {
  kiln::test::TempDir tmp;
  {
    kiln::DiskCache cache(kiln::test::config_at(tmp.path()));
    REQUIRE(cache.store(kiln::test::sample_key(1), kiln::test::sample_entry(1)));
  }
  for (const char* bad : {"", "-5", "abc", "5X", "99999999999999999999", " 5"}) {
    CAPTURE(std::string(bad));
    const auto r = kiln_cli({"cache", "prune", bad}, tmp.path());
    CAPTURE(r.output);
    CHECK(r.status == 2);
    CHECK(says(r, "not a size"));
    CHECK(entries(tmp.path()) == 1);
  }
  const auto r = kiln_cli({"cache", "prune", "512M"}, tmp.path());
  CAPTURE(r.output);
  CHECK(r.status == 0);
  CHECK(entries(tmp.path()) == 1);
}

TEST_CASE("kiln cache clear, prune and verify on a cache they cannot change fail and name the cause") {
  // They exited 0 having deleted nothing; verify said a bad entry was "not kiln's to delete".
  for (const char* sub : {"clear", "prune", "verify"}) {
    CAPTURE(std::string(sub));
    kiln::test::TempDir tmp;
    {
      kiln::DiskCache cache(kiln::test::config_at(tmp.path()));
      REQUIRE(cache.store(kiln::test::sample_key(1), kiln::test::sample_entry(1)));
    }
    // A bad entry for verify to remove: the bytes of entry 1 under the name of entry 2.
    const auto bad = kiln::test::entry_path(tmp.path(), kiln::test::sample_key(2));
    std::filesystem::copy_file(kiln::test::entry_path(tmp.path(), kiln::test::sample_key(1)), bad);
    std::vector<std::string> args{"cache", sub};
    if (std::string_view(sub) == "prune") args.emplace_back("0");
    const auto r = kiln_cli(args, tmp.path(), {}, [&] {
      return kiln::test::become_owner_of_as_nobody(tmp.path()) &&
             ::chmod(kiln::test::entries_dir(tmp.path()).c_str(), 0500) == 0;
    });
    CAPTURE(r.output);
    CHECK(r.status == 1);
    CHECK(says(r, "Permission denied"));
    CHECK_FALSE(says(r, "not kiln's to delete"));
    CHECK(entries(tmp.path()) == 2);
  }
}

TEST_CASE("kiln precompile refuses a --jobs or --arch it does not understand") {
  kiln::test::TempDir tmp;
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--jobs", "abc"}, {"--jobs", "-1"}, {"--jobs", "0"}, {"--jobs", "4294967297"},
        {"--arch", "sm_4294967382"}, {"--arch", "sm_"}, {"--arch", "sm_86x"}, {"--arch", "86"}}) {
    std::vector<std::string> full{"precompile"};
    full.insert(full.end(), args.begin(), args.end());
    if (args[0] == "--jobs") full.insert(full.end(), {"--arch", "sm_80"});
    full.push_back("vector_add");
    CAPTURE(args[0] + " " + args[1]);
    const auto r = kiln_cli(full, tmp.path());
    CAPTURE(r.output);
    CHECK(r.status == 2);
    CHECK(says(r, "'" + args[1] + "'"));
    CHECK(entries(tmp.path()) == 0);
  }
}

TEST_CASE("kiln COMMAND --help prints that command's usage, and an unknown option names itself") {
  kiln::test::TempDir tmp;
  const auto help = kiln_cli({"precompile", "--help"}, tmp.path());
  CAPTURE(help.output);
  CHECK(help.status == 0);
  CHECK(help.output.starts_with("usage: kiln precompile [--arch sm_XX]... [--jobs N] [KERNEL...] | --record FILE --arch sm_XX... |\n"
                                "      --link FILE --arch sm_XX... [KERNEL...]\n"));
  CHECK_FALSE(says(help, "cache stats"));
  const auto bad = kiln_cli({"precompile", "--frobnicate"}, tmp.path());
  CAPTURE(bad.output);
  CHECK(bad.status == 2);
  CHECK(says(bad, "kiln precompile: unknown option '--frobnicate'"));
  const auto general = kiln_cli({"--help"}, tmp.path());
  CHECK(general.status == 0);
  CHECK(says(general, "registries: examples"));
  CHECK(kiln_cli({"frobnicate"}, tmp.path()).status == 2);
}

TEST_CASE("kiln precompile with the disk cache off says so and fails") {
  kiln::test::TempDir tmp;
  const auto r = kiln_cli({"precompile", "--arch", "sm_80", "vector_add"}, tmp.path(), {{"KILN_CACHE", "off"}});
  CAPTURE(r.output);
  CHECK(r.status == 1);
  CHECK(says(r, "precompile fills the disk cache, which is not in use: the disk cache is disabled (KILN_CACHE=off)"));
  CHECK_FALSE(says(r, "[compile]"));
  CHECK_FALSE(says(r, "compiled"));
}

TEST_CASE("kiln info with the toolkit's stub libcuda on the library path names the stub") {
  // The toolkit's link-time stub answers cuInit with CUDA_ERROR_STUB_LIBRARY (34) and cannot name it.
  const std::filesystem::path stub = std::filesystem::path(KILN_TEST_TOOLKIT_DIR) / "lib64" / "stubs" / "libcuda.so";
  if (!std::filesystem::exists(stub)) return;
  kiln::test::TempDir tmp;
  const std::filesystem::path dir = tmp.path() / "stubs";
  std::filesystem::create_directories(dir);
  std::filesystem::create_symlink(stub, dir / "libcuda.so.1");
  const auto r = kiln_cli({"info"}, tmp.path() / "cache", {{"LD_LIBRARY_PATH", dir.string()}});
  CAPTURE(r.output);
  CHECK(r.status == 0);  // informational: no driver is an answer
  CHECK(says(r, "the libcuda.so.1 loaded is the CUDA toolkit's stub library"));
  CHECK(says(r, "CUDA_ERROR_STUB_LIBRARY"));
  CHECK(says(r, "LD_LIBRARY_PATH"));
}

#endif  // KILN_TEST_CLI

TEST_CASE("kiln cache stats says who expires the remote's entries: ttl_s on Redis, the server's own rules on HTTP and S3") {
  kiln::test::TempDir tmp;
  const std::string server_rules = "as the server's own rules say (ttl_s does not apply";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"redis://127.0.0.1:1/0?ttl_s=7200", "entries expire after 2 h,"},
      {"http://127.0.0.1:1/cache", "entries expire " + server_rules},
      {"s3://bucket/cache?region=us-east-1&endpoint=http://127.0.0.1:1", "entries expire " + server_rules},
      {"redis://127.0.0.1:1/0 http://127.0.0.1:1/cache", "entries expire from Redis after 168 h, from the object store " + server_rules}};
  for (const auto& [url, expiry] : cases) {
    CAPTURE(url);
    const auto r = kiln_cli({"cache", "stats"}, tmp.path(), {{"KILN_REMOTE_CACHE", url}, {"KILN_REMOTE_KEY", "a fleet key of enough bytes"},
                                                            {"AWS_ACCESS_KEY_ID", "id"}, {"AWS_SECRET_ACCESS_KEY", "secret"}});
    CAPTURE(r.output);
    CHECK(r.status == 0);
    CHECK(says(r, expiry));
  }
}
