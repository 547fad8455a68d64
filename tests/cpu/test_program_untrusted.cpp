// A program's input is untrusted: options from an allowlist (none writes a file), every include in the
// key or refused, sizes capped and read from stat first, no FIFO waited on, no host file in a message.
#include <kiln/cache.hpp>
#include <kiln/error.hpp>
#include <kiln/precompile.hpp>
#include <kiln/program.hpp>

#include "cache_test_util.hpp"
#include "private_cache.hpp"
#include "memory_limit.hpp"
#include "program/program_check.hpp"  // runtime/src: the caps
#include "program/program_key.hpp"
#include "text_util.hpp"

#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

using kiln::test::contains;
using kiln::test::write_file;


std::string read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

kiln::ProgramSource simple(std::string source = "extern \"C\" __global__ void k(float* x) { x[0] = 1; }\n") {
  kiln::ProgramSource s;
  s.source = std::move(source);
  s.name_expressions = {"k"};
  s.label = "tests/untrusted";
  return s;
}

using kiln::test::PrivateCache;  // private_cache.hpp

// The message of the kiln::Error(invalid_argument) that making the program throws; "" when it throws none.
std::string refusal(const kiln::ProgramSource& s, const kiln::RegistryOptions& options) {
  try {
    kiln::Program program(s, 0, options);
  } catch (const kiln::Error& e) {
    CHECK(e.code() == kiln::Errc::invalid_argument);
    return e.what();
  }
  return {};
}

// The working directory, changed for the scope (the quoted-include rule is about it).
struct ScopedCwd {
  fs::path old = fs::current_path();
  explicit ScopedCwd(const fs::path& to) { fs::current_path(to); }
  ~ScopedCwd() { fs::current_path(old); }
};

}  // namespace

TEST_CASE("a program's options come from an allowlist: none that writes or reads a file outside the key") {
  const PrivateCache here;
  const fs::path victim = here.tmp.path() / "victim.txt";
  write_file(victim, "the user's own file\n");
  // Each list, and the option in it that is refused.
  for (const auto& [options, refused] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--create-pch=" + victim.string()}, "--create-pch=" + victim.string()},
           {{"-time=" + victim.string()}, "-time=" + victim.string()},
           {{"--fdevice-time-trace=" + victim.string()}, "--fdevice-time-trace=" + victim.string()},
           {{"--use-pch=" + victim.string()}, "--use-pch=" + victim.string()},
           {{"-include", victim.string()}, "-include"},
           {{"--pre-include=" + victim.string()}, "--pre-include=" + victim.string()},
           {{"-pch"}, "-pch"},
           {{"--pch-dir=" + here.tmp.path().string()}, "--pch-dir="},
           {{"-arch=sm_90"}, "-arch=sm_90"},
           {{"-I"}, "-I"},
           {{"-DOK=1", "-isystem" + here.tmp.path().string()}, "-isystem"},
       }) {
    kiln::ProgramSource s = simple();
    s.options = options;
    CAPTURE(refused);
    const std::string message = refusal(s, here.options);
    CHECK(contains(message, "tests/untrusted"));
    CHECK(contains(message, "option '" + refused));
    CHECK(contains(message, refused == "-I" ? "names no directory" : "allowed: "));
  }
  CHECK(read(victim) == "the user's own file\n");
  CHECK_FALSE(fs::exists(victim.string() + ".json"));

  fs::create_directories(here.tmp.path() / "inc");
  const std::string inc = (here.tmp.path() / "inc").string();
  kiln::ProgramSource fine = simple();
  fine.options = {"-std=c++17", "-DA=1", "-DB=x y", "-UC", "--use_fast_math", "-lineinfo", "--maxrregcount=32",
                  "--ftz=true", "--diag-suppress=177,550", "--expt-relaxed-constexpr", "-default-device",
                  "-I" + inc, "-I", inc, "--include-path=" + inc};
  CHECK(refusal(fine, here.options).empty());
  // NVRTC's other spellings, as real callers write them (CuPy passes --std=c++17 and -ftz=true).
  kiln::ProgramSource spelled = simple();
  spelled.options = {"--std=c++17", "-ftz=true", "-prec-div=false", "-maxrregcount=64", "-use_fast_math"};
  CHECK(refusal(spelled, here.options).empty());
}

TEST_CASE("an include kiln cannot put in the key is refused, naming the file and the line") {
  const PrivateCache here;
  const fs::path outside = here.tmp.path() / "outside" / "v.h";
  write_file(outside, "#define V 1\n");
  const std::string abs = outside.string();
  const fs::path inc = here.tmp.path() / "inc";
  write_file(inc / "fine.h", "#pragma once\n#include \"sub/also.h\"\n");
  write_file(inc / "sub" / "also.h", "#define ALSO 1\n");

  // The source, then an in-memory header, then a file of an -I directory.
  for (const auto& [text, why] : std::vector<std::pair<std::string, std::string>>{
           {"#include \"" + abs + "\"\n", "is an absolute path"},
           {"#include <" + abs + ">\n", "is an absolute path"},
           {"  #  include_next \"" + abs + "\"\n", "is an absolute path"},
           {"#/* hidden */include \"" + abs + "\"\n", "is an absolute path"},
           {"%:include \"" + abs + "\"\n", "is an absolute path"},
           {"#inc\\\nlude \"" + abs + "\"\n", "is an absolute path"},
           {"#include \"../outside/v.h\"\n", "'..' part"},
           {"#define H \"" + abs + "\"\n#include H\n", "computed"},
           {"#if __has_include(\"" + abs + "\")\n#endif\n", "is an absolute path"},
       }) {
    CAPTURE(text);
    kiln::ProgramSource in_source = simple(text + "extern \"C\" __global__ void k() {}\n");
    const std::string m1 = refusal(in_source, here.options);
    CHECK(contains(m1, "its source"));
    CHECK(contains(m1, why));
    CHECK(contains(m1, "line " + std::string(text.starts_with("#define") ? "2" : "1")));

    kiln::ProgramSource in_header = simple("#include \"ops.cuh\"\nextern \"C\" __global__ void k() {}\n");
    in_header.headers = {{"ops.cuh", text}};
    const std::string m2 = refusal(in_header, here.options);
    CHECK(contains(m2, "header 'ops.cuh'"));
    CHECK(contains(m2, why));

    const fs::path dir = here.tmp.path() / "dir";
    fs::remove_all(dir);
    write_file(dir / "a.h", text);
    kiln::ProgramSource in_dir = simple();
    in_dir.options = {"-I" + dir.string()};
    const std::string m3 = refusal(in_dir, here.options);
    CHECK(contains(m3, (dir / "a.h").string()));
    CHECK(contains(m3, why));
  }

  // What would hide an include from a scan that reads lines naively: a raw string whose quote and
  // comment opener are text; a trigraph splice or '#' under C++14 (NVRTC reads them there).
  for (const auto& [text, std] : std::vector<std::pair<std::string, std::string>>{
           {"const char* s = R\"x(\" /* )x\";\n#include \"" + abs + "\"\n", "-std=c++17"},
           {"#inc?\?/\nlude \"" + abs + "\"\n", "-std=c++14"},
           {"?\?=include \"" + abs + "\"\n", "-std=c++11"},
           {"// a comment ?\?/\n#include \"" + abs + "\"\n", "-std=c++17"},  // no trigraphs: the line is live
       }) {
    CAPTURE(text);
    kiln::ProgramSource hidden = simple(text);
    hidden.options = {std};
    CHECK(contains(refusal(hidden, here.options), "absolute path"));
  }
  kiln::ProgramSource raw_only = simple("const char* s = R\"(\n#include \"" + abs + "\"\n)\";\n");
  CHECK(refusal(raw_only, here.options).empty());  // text of a raw string, not an include

  // In an -I directory, a ".." that NVRTC finds beside the file, still in the directory, is keyed.
  const fs::path tree = here.tmp.path() / "tree";
  write_file(tree / "a" / "x.h", "#include \"../b/y.h\"\n");
  write_file(tree / "b" / "y.h", "#define Y 1\n");
  kiln::ProgramSource within = simple("#include \"a/x.h\"\nextern \"C\" __global__ void k() {}\n");
  within.options = {"-I" + tree.string()};
  CHECK(refusal(within, here.options).empty());
  write_file(tree / "a" / "z.h", "#include \"../../outside/v.h\"\n");
  CHECK(contains(refusal(within, here.options), "reaches out of"));

  // Comments, strings and includes kiln keys are not refused.
  kiln::ProgramSource fine = simple("// #include \"" + abs + "\"\n/* #include \"" + abs +
                                    "\" */\nconst char* s = \"#include \\\"/x\\\"\";\n#include \"fine.h\"\n#include <ops.cuh>\n"
                                    "extern \"C\" __global__ void k() {}\n");
  fine.headers = {{"ops.cuh", "#include \"fine.h\"\n"}};
  fine.options = {"-I" + inc.string()};
  CHECK(refusal(fine, here.options).empty());

  // Header names that are paths out of the key.
  for (const std::string& name : {abs, std::string("../v.h"), std::string("a/../../v.h")}) {
    kiln::ProgramSource s = simple();
    s.headers = {{name, "#define V 2\n"}};
    CHECK(contains(refusal(s, here.options), "header '" + name + "' in memory"));
  }
}

TEST_CASE("a macro that hands its parameter to __has_include is a probe: defined freely, checked where used") {
  const PrivateCache here;
  const std::string abs = (here.tmp.path() / "outside" / "v.h").string();
  write_file(here.tmp.path() / "outside" / "v.h", "#define V 1\n");
  // As Kokkos' mdspan.hpp (CuPy's headers hold it) and CCCL define theirs, and use them.
  const std::string kokkos = "#ifndef __has_include\n#define HAS(x) 0\n#else\n#define HAS(x) __has_include(x)\n#endif\n"
                             "#if HAS(<version>)\n#endif\n";
  const std::string cccl = "#ifdef __has_include\n#  define _CCCL_HAS_INCLUDE(_X) __has_include(_X)\n#endif\n";
  const fs::path dir = here.tmp.path() / "dir";
  write_file(dir / "mdspan.hpp", kokkos);
  write_file(dir / "cccl" / "preprocessor.h", cccl);
  write_file(dir / "uses.h", "#include \"cccl/preprocessor.h\"\n#if _CCCL_HAS_INCLUDE(<new>)\n#endif\n");
  kiln::ProgramSource fine = simple("#include <mdspan.hpp>\nextern \"C\" __global__ void k() {}\n");
  fine.options = {"-I" + dir.string()};
  CHECK(refusal(fine, here.options).empty());

  // A use that computes its name, in another file of the directory than the definition: refused there.
  write_file(dir / "computed.h", "#define NAME <new>\n#if _CCCL_HAS_INCLUDE(NAME)\n#endif\n");
  std::string m = refusal(fine, here.options);
  CHECK(contains(m, (dir / "computed.h").string()));
  CHECK(contains(m, "line 2"));
  CHECK(contains(m, "computed"));
  fs::remove(dir / "computed.h");
  write_file(dir / "absolute.h", "#if HAS(\"" + abs + "\")\n#endif\n");
  CHECK(contains(refusal(fine, here.options), "is an absolute path"));
  fs::remove(dir / "absolute.h");
  CHECK(refusal(fine, here.options).empty());

  // In the source, with the definition in a header in memory; and a macro that hands on no parameter.
  kiln::ProgramSource in_memory = simple("#include \"p.h\"\n#define N <new>\n#if HAS(N)\n#endif\n");
  in_memory.headers = {{"p.h", kokkos}};
  m = refusal(in_memory, here.options);
  CHECK(contains(m, "its source"));
  CHECK(contains(m, "line 3"));
  kiln::ProgramSource not_a_parameter = simple("#define N <new>\n#define HAS(x) __has_include(N)\n");
  CHECK(contains(refusal(not_a_parameter, here.options), "computed"));
}

TEST_CASE("the toolkit's own include directories are keyed as the toolkit's, not scanned: CCCL's computed includes pass") {
  const PrivateCache here;
  // CuPy names the toolkit's CCCL with -I; Thrust's system headers include computed names.
  const fs::path cccl = fs::path(KILN_TEST_TOOLKIT_DIR) / "include" / "cccl";
  if (!fs::exists(cccl / "thrust" / "execution_policy.h")) {
    MESSAGE("no CCCL in " << cccl << ": nothing to check");
    return;
  }
  for (const std::string& dir : {cccl.string(), (fs::path(KILN_TEST_TOOLKIT_DIR) / "include").string()}) {
    CAPTURE(dir);
    kiln::ProgramSource s = simple("#include <thrust/execution_policy.h>\nextern \"C\" __global__ void k() {}\n");
    s.options = {"-I" + dir};
    CHECK(refusal(s, here.options).empty());
  }
  // A copy of the same header elsewhere is scanned, and its computed include refused.
  const fs::path copy = here.tmp.path() / "copy";
  fs::create_directories(copy / "thrust");
  fs::copy_file(cccl / "thrust" / "execution_policy.h", copy / "thrust" / "execution_policy.h");
  kiln::ProgramSource elsewhere = simple();
  elsewhere.options = {"-I" + copy.string()};
  CHECK(contains(refusal(elsewhere, here.options), "computed"));
}

TEST_CASE("a quoted include NVRTC would read from the working directory is refused, not served stale") {
  const PrivateCache here;
  const fs::path cwd = here.tmp.path() / "cwd";
  write_file(cwd / "v.h", "#define V 1\n");
  write_file(cwd / "sub" / "b.h", "#define B 1\n");
  const ScopedCwd in(cwd);
  kiln::ProgramSource s = simple("#include \"v.h\"\nextern \"C\" __global__ void k() {}\n");
  s.label = "untrusted";  // no directory: the source lies in the working directory
  const std::string m = refusal(s, here.options);
  CHECK(contains(m, "#include \"v.h\""));
  CHECK(contains(m, "working directory"));
  // Beside an in-memory header in a directory: NVRTC reads the file there before the header of the name.
  kiln::ProgramSource h = simple("#include \"sub/a.h\"\nextern \"C\" __global__ void k() {}\n");
  h.headers = {{"sub/a.h", "#include \"b.h\"\n"}, {"sub/b.h", "#define B 2\n"}};
  CHECK(contains(refusal(h, here.options), "sub/b.h"));
  // In memory under the name the source includes: NVRTC takes that one, so it is keyed.
  kiln::ProgramSource mem = s;
  mem.headers = {{"v.h", "#define V 2\n"}};
  CHECK(refusal(mem, here.options).empty());
  // A label with a directory puts the source there: NVRTC looks beside it.
  kiln::ProgramSource labelled = simple("#include \"b.h\"\nextern \"C\" __global__ void k() {}\n");
  labelled.label = "sub/kernels";
  CHECK(contains(refusal(labelled, here.options), "sub/b.h"));
}

TEST_CASE("a host file an #include names never reaches the program's error message") {
  const PrivateCache here;
  const fs::path secret = here.tmp.path() / "secret.txt";
  write_file(secret, "kiln-test-secret-line: not C++ at all\n");
  kiln::ProgramSource s = simple("#include \"" + secret.string() + "\"\nextern \"C\" __global__ void k() {}\n");
  std::string message;
  try {
    kiln::Program program(s, 0, here.options);
    (void)program.precompile(80);
  } catch (const kiln::Error& e) {
    message = e.what();
  }
  CHECK(contains(message, secret.string()));
  CHECK_FALSE(contains(message, "kiln-test-secret-line"));
}

TEST_CASE("an include directory is sized from stat before a byte is read, and a FIFO in it is refused at once") {
  const PrivateCache here;
  // A sparse file of 3 GiB: refused by its size, in a child that could not even hold it in memory.
  const fs::path big = here.tmp.path() / "big";
  fs::create_directories(big);
  {
    const int fd = ::open((big / "huge.h").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    REQUIRE(fd >= 0);
    REQUIRE(::ftruncate(fd, off_t{3} << 30) == 0);
    ::close(fd);
  }
  const int code = kiln::test::run_with_memory_headroom(std::size_t{512} << 20, [&] {
    kiln::ProgramSource s = simple();
    s.options = {"-I" + big.string()};
    try {
      kiln::Program program(s, 0, here.options);
    } catch (const kiln::Error& e) {
      const std::string m = e.what();
      return contains(m, "MiB of files") && contains(m, "huge.h") ? 0 : 3;
    }
    return 4;
  });
  CHECK(code == 0);

  const fs::path fifo_dir = here.tmp.path() / "fifo";
  fs::create_directories(fifo_dir);
  REQUIRE(::mkfifo((fifo_dir / "pipe.h").c_str(), 0600) == 0);
  kiln::ProgramSource s = simple("#include \"pipe.h\"\nextern \"C\" __global__ void k() {}\n");
  s.options = {"-I" + fifo_dir.string()};
  const std::string m = refusal(s, here.options);
  CHECK(contains(m, (fifo_dir / "pipe.h").string()));
  CHECK(contains(m, "a FIFO"));
  // By an absolute path, or from the working directory: refused as any include out of the key.
  kiln::ProgramSource by_path = simple("#include \"" + (fifo_dir / "pipe.h").string() + "\"\n");
  CHECK(contains(refusal(by_path, here.options), "absolute path"));
  const ScopedCwd in(fifo_dir);
  kiln::ProgramSource from_cwd = simple("#include \"pipe.h\"\n");
  from_cwd.label = "untrusted";
  CHECK(contains(refusal(from_cwd, here.options), "not a regular file"));
}

TEST_CASE("a program's source, headers and name expressions are capped, the message naming the cap") {
  const PrivateCache here;
  kiln::ProgramSource big = simple(std::string(kiln::detail::kMaxProgramBytes + 1, ' '));
  CHECK(contains(refusal(big, here.options), "MiB a program may give"));

  kiln::ProgramSource headers = simple();
  headers.headers = {{"a.h", std::string(kiln::detail::kMaxProgramBytes / 2, ' ')},
                     {"b.h", std::string(kiln::detail::kMaxProgramBytes / 2, ' ')}};
  CHECK(contains(refusal(headers, here.options), "MiB a program may give"));

  kiln::ProgramSource many = simple();
  many.name_expressions.clear();
  for (int i = 0; i < 10'000; ++i) many.name_expressions.push_back("k<" + std::to_string(i) + ">");
  const std::string m = refusal(many, here.options);
  CHECK(contains(m, "10000 name expressions"));
  CHECK(contains(m, std::to_string(kiln::detail::kMaxNameExpressions)));

  kiln::ProgramSource longname = simple();
  longname.name_expressions = {std::string(kiln::detail::kMaxNameExpressionBytes + 1, 'k')};
  CHECK(contains(refusal(longname, here.options), "KiB a program may give"));

  kiln::ProgramSource at_cap = simple();
  at_cap.name_expressions.clear();
  for (std::size_t i = 0; i < kiln::detail::kMaxNameExpressions; ++i) {
    std::string name = "k";  // appended: `"k" + ...` has g++ 12 warn falsely (-Wrestrict)
    name += std::to_string(i);
    at_cap.name_expressions.push_back(std::move(name));
  }
  CHECK(refusal(at_cap, here.options).empty());
}
