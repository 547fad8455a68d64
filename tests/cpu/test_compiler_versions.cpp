// The disk-cache key names the NVRTC and nvJitLink a process would load, not the toolkit kiln was built
// with, and a process that only hits the disk learns them without loading NVRTC. Real processes: a key
// printer run with a fake libnvrtc.so.13 (tests/fake_nvrtc/) first on LD_LIBRARY_PATH.
#include <doctest/doctest.h>

#include "cache_test_util.hpp"
#include "run_process.hpp"

#include <cstdio>

#if defined(KILN_TEST_PRINT_KEY) && defined(KILN_TEST_FAKE_NVRTC)

namespace {

kiln::test::ProcessResult print_key(const std::filesystem::path& cache, std::optional<std::string> library_path,
                                    std::optional<std::string> version) {
  return kiln::test::run_process({KILN_TEST_PRINT_KEY}, {{"KILN_CACHE_DIR", cache.string()},
                                                        {"KILN_CACHE", std::nullopt},
                                                        {"LD_LIBRARY_PATH", library_path},
                                                        {"FAKE_NVRTC_VERSION", version}},
                                 std::chrono::seconds(60));
}

std::string line_of(const std::string& text, std::string_view field) {
  std::string prefix = "\n";  // appended, not "\n" + ...: g++ 12 then warns falsely (-Wrestrict)
  prefix += field;
  prefix += '=';
  const auto at = text.find(prefix);
  if (at == std::string::npos) return {};
  return text.substr(at + 1, text.find('\n', at + 1) - at - 1);
}

// Puts a copy of the fake library at `dir`/libnvrtc.so.13 as a new file (a new inode), as an upgrade does.
void install_fake_nvrtc(const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  const auto staged = dir / "libnvrtc.so.13.new";
  std::filesystem::copy_file(KILN_TEST_FAKE_NVRTC, staged, std::filesystem::copy_options::overwrite_existing);
  std::filesystem::rename(staged, dir / "libnvrtc.so.13");
}

}  // namespace

TEST_CASE("the key carries the loaded NVRTC's version; a process that only needs the key does not load it twice") {
  kiln::test::TempDir tmp;
  const auto cache = tmp.path() / "cache";
  const auto lib = tmp.path() / "lib";
  install_fake_nvrtc(lib);

  const auto first = print_key(cache, lib.string(), "13.9");
  CAPTURE(first.output);
  REQUIRE(first.status == 0);
  CHECK(line_of(first.output, "nvrtc") == "nvrtc=13.9");
  CHECK(first.output.find("nvrtc mapped: yes") != std::string::npos);  // nothing recorded yet: loaded to ask

  const auto again = print_key(cache, lib.string(), "13.9");
  CAPTURE(again.output);
  CHECK(again.output == first.output.substr(0, first.output.find("nvrtc mapped")) + "nvrtc mapped: no\n");

  // An upgrade: another file at the same path, which says 13.7. Its identity changed: asked again.
  install_fake_nvrtc(lib);
  const auto upgraded = print_key(cache, lib.string(), "13.7");
  CAPTURE(upgraded.output);
  CHECK(line_of(upgraded.output, "nvrtc") == "nvrtc=13.7");
  CHECK(upgraded.output.find("nvrtc mapped: yes") != std::string::npos);

  // Another search path finds another library: the toolkit's own.
  const auto toolkit = print_key(cache, std::nullopt, std::nullopt);
  CAPTURE(toolkit.output);
  CHECK(line_of(toolkit.output, "nvrtc").starts_with("nvrtc=13."));
  CHECK(line_of(toolkit.output, "nvrtc") != "nvrtc=13.9");
  CHECK(line_of(toolkit.output, "nvrtc") != "nvrtc=13.7");
  CHECK(line_of(toolkit.output, "nvjitlink") == line_of(first.output, "nvjitlink"));  // the same nvJitLink
}

#endif
