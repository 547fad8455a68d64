// The kiln command on files and names from elsewhere: a record or a pack path that is no regular file, a
// record naming a kernel that is gone, a pack that does not check out under --json, a registry nobody has.
// Runs the real `kiln` binary; precompile runs real NVRTC.
#include <doctest/doctest.h>

#include "cli_test_util.hpp"

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <fstream>

#ifdef KILN_TEST_CLI

using kiln::test::kiln_cli;
using kiln::test::says;

namespace {

std::size_t line_count(const std::string& text) {
  std::size_t n = 0;
  for (char c : text) n += c == '\n';
  return n;
}

}  // namespace

TEST_CASE("kiln precompile --record of a FIFO or a device is refused at once, in one line") {
  kiln::test::TempDir tmp;
  const auto fifo = tmp.path() / "pipe.record";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  for (const auto& [path, kind] : {std::pair{fifo.string(), "a FIFO"}, std::pair{std::string("/dev/zero"), "a device"}}) {
    const auto r = kiln_cli({"precompile", "--record", path, "--arch", "sm_86"}, tmp.path());
    CAPTURE(r.output);
    CHECK(r.status == 1);
    CHECK(says(r, path + " is " + kind + ", not a regular file"));
    CHECK(line_count(r.output) == 1);
  }
}

TEST_CASE("kiln precompile --record of a kernel that is gone reports it and compiles the rest") {
  kiln::test::TempDir tmp;
  const auto record = tmp.path() / "demand.record";
  const auto field = kiln::test::record_field;
  std::ofstream(record) << "kiln record 1\ntable\n" << field("registry", "examples") << field("kernel", "renamed_kernel")
                        << "arch 86\nend\ntable\n" << field("registry", "examples") << field("kernel", "vector_add")
                        << "arch 86\nend\n";
  const auto r = kiln_cli({"precompile", "--record", record.string(), "--arch", "sm_86"}, tmp.path());
  CAPTURE(r.output);
  CHECK(r.status == 1);
  CHECK(says(r, "FAILED  examples.renamed_kernel\n"));
  CHECK(says(r, "no kernel 'renamed_kernel'"));
  CHECK(says(r, "compiled and cached  vector_add"));
  CHECK(says(r, ": 1 in the cache, 1 not"));
  CHECK(kiln::test::entries(tmp.path()) == 1);
}

TEST_CASE("kiln cache export onto a FIFO or a device node refuses it and leaves it as it is") {
  kiln::test::TempDir tmp;
  std::vector<std::filesystem::path> targets{tmp.path() / "pipe.kpack"};
  REQUIRE(::mkfifo(targets[0].c_str(), 0600) == 0);
  // A node like /dev/full's (only root may make one): exporting onto it used to replace it with a file.
  if (::mknod((tmp.path() / "full").c_str(), S_IFCHR | 0600, ::makedev(1, 7)) == 0) targets.push_back(tmp.path() / "full");
  for (const auto& target : targets) {
    const auto r = kiln_cli({"cache", "export", target.string()}, tmp.path() / "cache");
    CAPTURE(r.output);
    CHECK(r.status == 1);
    CHECK(says(r, target.string() + " is a "));
    CHECK(says(r, "not a regular file"));
    const auto kind = std::filesystem::symlink_status(target).type();
    CHECK((kind == std::filesystem::file_type::fifo || kind == std::filesystem::file_type::character));
  }
  // Beside them nothing is left behind.
  std::size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(tmp.path())) files += e.is_regular_file();
  CHECK(files == 0);
}

TEST_CASE("kiln cache show --json of a pack that is not sound prints a JSON error and fails") {
  kiln::test::TempDir tmp;
  const auto bad = tmp.path() / "bad.kpack";
  std::ofstream(bad) << "not a pack";
  const auto r = kiln_cli({"cache", "show", bad.string(), "--json"}, tmp.path() / "cache");
  CAPTURE(r.output);
  CHECK(r.status == 1);
  CHECK(says(r, "\"pack\": \"" + bad.string() + "\""));
  CHECK(says(r, "\"error\": \"kiln: cache show: "));
  CHECK(says(r, "\"code\": \"cache\""));
}

TEST_CASE("kiln cache list --registry of a registry nobody has fails and names it") {
  kiln::test::TempDir tmp;
  const auto r = kiln_cli({"cache", "list", "--registry", "nosuch"}, tmp.path());
  CAPTURE(r.output);
  CHECK(r.status == 2);
  CHECK(says(r, "no registry 'nosuch' (registries: "));
  CHECK(says(r, "examples"));
  const auto known = kiln_cli({"cache", "list", "--registry", "examples"}, tmp.path());
  CAPTURE(known.output);
  CHECK(known.status == 0);
}

#endif
