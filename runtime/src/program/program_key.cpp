// A program's digest: its content, with include directories taken by the bytes of their files.
#include "program/program_key.hpp"

#include "base/settings.hpp"  // KILN_TOOLKIT
#include "chain/key.hpp"  // Sha256, sha256_hex
#include "program/program_check.hpp"  // include_option, scan_includes

#include <kiln/error.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <system_error>

namespace kiln::detail {
namespace {

// What a directory entry that is not a regular file or a directory is, for the message.
std::string kind_of(const struct stat& st) {
  if (S_ISFIFO(st.st_mode)) return "a FIFO";
  if (S_ISSOCK(st.st_mode)) return "a socket";
  if (S_ISCHR(st.st_mode)) return "a character device";
  if (S_ISBLK(st.st_mode)) return "a block device";
  return "not a regular file";
}

// "'path'", appended rather than `"'" + ...`, which g++ 12 warns falsely about (-Wrestrict).
std::string quoted(const std::filesystem::path& file) {
  std::string q(1, '\'');
  q += file.string();
  q += '\'';
  return q;
}

// Exactly `size` bytes of `file` (as its stat said), or why not: opened without blocking (a FIFO put in
// its place since is refused, not waited on), and refused when it is no longer that size.
Result<std::string> read_exactly(const std::filesystem::path& file, std::uint64_t size) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return fail("cannot read '" + file.string() + "': " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return fail(quoted(file) + " is " + kind_of(st) + ", not a header");
  }
  std::string bytes(size, '\0');
  std::size_t got = 0;
  while (got < size) {
    const ssize_t n = ::read(fd, bytes.data() + got, size - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  char extra = 0;
  const bool longer = got == size && ::read(fd, &extra, 1) > 0;
  ::close(fd);
  if (got != size || longer) return fail(quoted(file) + " changed while it was read");
  return bytes;
}

}  // namespace

Result<std::string> directory_digest(const std::string& dir, bool trigraphs) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return fail("'" + dir + "' is not a directory");
  // Every file's size from stat first: a directory over the caps is refused before a byte is read.
  std::vector<std::pair<fs::path, std::uint64_t>> files;
  std::uint64_t total = 0;
  // Links to directories are followed, as NVRTC follows them; a loop ends at the file cap or ELOOP.
  for (fs::recursive_directory_iterator it(dir, fs::directory_options::follow_directory_symlink, ec), end;
       !ec && it != end; it.increment(ec)) {
    struct stat st {};
    if (::stat(it->path().c_str(), &st) != 0) {
      if (errno == ENOENT) continue;  // a dangling link: NVRTC finds nothing there either
      return fail("cannot read '" + it->path().string() + "': " + std::strerror(errno));
    }
    if (S_ISDIR(st.st_mode)) continue;
    // NVRTC opening a FIFO (or a device) would wait, or read without end: refused here, at once.
    if (!S_ISREG(st.st_mode))
      return fail("'" + dir + "' holds '" + it->path().string() + "', which is " + kind_of(st) +
                  ": an include directory may hold only files and directories");
    files.emplace_back(it->path(), static_cast<std::uint64_t>(st.st_size));
    total += static_cast<std::uint64_t>(st.st_size);
    if (files.size() > kMaxIncludeFiles)
      return fail("'" + dir + "' holds more than " + std::to_string(kMaxIncludeFiles) + " files");
    if (total > kMaxIncludeBytes)
      return fail("'" + dir + "' holds more than " + std::to_string(kMaxIncludeBytes >> 20) + " MiB of files (" +
                  it->path().string() + " is " + std::to_string(st.st_size >> 20) + " MiB)");
  }
  if (ec) return fail("cannot list '" + dir + "': " + ec.message());
  std::sort(files.begin(), files.end());
  // Read once (within the caps above); the probe macros one file defines (`#define HAS(x) __has_include(x)`)
  // are checked where any file of the directory uses them.
  std::vector<std::string> contents;
  std::vector<std::string> probes;
  for (const auto& [file, size] : files) {
    Result<std::string> bytes = read_exactly(file, size);
    if (!bytes) return fail(bytes.error());
    if (const Result<std::vector<IncludeRef>> refs = scan_includes(*bytes, trigraphs, &probes); !refs)
      return fail(quoted(file) + ", " + refs.error() + ": kiln cannot key what it reads");
    contents.push_back(std::move(*bytes));
  }
  Sha256 digest;
  for (std::size_t i = 0; i < files.size(); ++i) {
    const fs::path& file = files[i].first;
    const std::string* bytes = &contents[i];
    // What a file includes must be keyed too: a header here may not reach outside by an absolute path
    // or a ".." part, nor by a name only the preprocessor computes.
    const Result<std::vector<IncludeRef>> refs = scan_includes(*bytes, trigraphs, &probes);
    if (!refs) return fail(quoted(file) + ", " + refs.error() + ": kiln cannot key what it reads");
    // A ".." name is keyed where NVRTC finds it first, beside the file and still under `dir`; anywhere
    // else (another -I directory's parent) it is not.
    for (const IncludeRef& r : *refs) {
      if (!has_parent_part(r.name)) continue;
      // Resolved as the kernel resolves it: a link, then its "..".
      std::error_code e1, e2;
      const fs::path real = fs::canonical(file.parent_path() / r.name, e1);
      const fs::path root = fs::canonical(dir, e2);
      const std::string inside = e1 || e2 ? std::string() : real.lexically_relative(root).generic_string();
      if (r.quoted && !inside.empty() && !has_parent_part(inside) && fs::is_regular_file(real, e1)) continue;
      return fail(quoted(file) + ", line " + std::to_string(r.line) + ": " + (r.probe ? "__has_include" : "#include") +
                  " of '" + r.name + "', a path with a '..' part, reaches out of '" + dir +
                  "': kiln cannot key what it reads");
    }
    std::string head;
    append_field(head, "file", file.lexically_relative(dir).generic_string());
    head += std::to_string(bytes->size()) + "\n";
    digest.update(head.data(), head.size());
    digest.update(bytes->data(), bytes->size());
  }
  const Sha256Digest sum = digest.final();
  return to_hex(sum.data(), sum.size());
}

std::string program_digest(const ProgramSource& source) {
  std::string text = "kiln program 1\n";
  append_field(text, "source", source.source);
  for (const ProgramHeader& h : source.headers) {
    append_field(text, "header", h.name);
    append_field(text, "bytes", h.source);
  }
  const std::vector<std::string>& options = source.options;
  for (std::size_t i = 0, next = 0; i < options.size(); i = next) {
    // An include directory counts by what is in it, so that two checkouts or machines share the key.
    const std::string dir = include_option(options, i, next);
    if (dir.empty()) {
      append_field(text, "option", options[i]);
      continue;
    }
    // A directory of the toolkit's own headers (CCCL's, as CuPy names it) is keyed as the headers kiln
    // adds itself: by the toolkit, whose compilers' versions every key holds, CCCL's version and the
    // directory's place; its files are the toolkit's, and hold computed includes (Thrust's system
    // headers) that no scan could key.
    if (const std::string place = toolkit_place(dir); !place.empty()) {
      append_field(text, "toolkit include", place + " " + toolkit_headers().cccl_version);
      continue;
    }
    const Result<std::string> files = remembered_directory_digest(dir, trigraphs_on(options));
    if (!files)
      throw Error(Errc::invalid_argument, "kiln: program '" + source.label + "': its include directory " + files.error());
    append_field(text, "include", *files);
  }
  for (const std::string& e : source.name_expressions) append_field(text, "kernel", e);
  return sha256_hex(text);
}

const ToolkitHeaders& toolkit_headers() {
  static const ToolkitHeaders headers = [] {
    ToolkitHeaders h;
    const std::string named = setting("KILN_TOOLKIT");
    const std::filesystem::path toolkit = named.empty() ? "/usr/local/cuda" : named;
    std::error_code ec;
    h.toolkit_include = std::filesystem::canonical(toolkit / "include", ec);
    if (ec) h.toolkit_include.clear();
    for (const auto& dir : {toolkit / "include" / "cccl", toolkit / "include"}) {
      std::ifstream version(dir / "cub" / "version.cuh");
      if (!version) continue;
      std::string line;
      while (std::getline(version, line)) {
        constexpr std::string_view kDefine = "#define CUB_VERSION ";
        if (!line.starts_with(kDefine)) continue;
        const unsigned long v = std::strtoul(line.c_str() + kDefine.size(), nullptr, 10);
        h.cccl_version = std::to_string(v / 100000) + "." + std::to_string(v / 100 % 1000) + "." + std::to_string(v % 100);
        h.include_dir = dir.string();
        return h;
      }
    }
    return h;
  }();
  return headers;
}

std::string toolkit_place(const std::string& dir) {
  const std::filesystem::path& root = toolkit_headers().toolkit_include;
  if (root.empty()) return {};
  std::error_code ec;
  const std::filesystem::path real = std::filesystem::canonical(dir, ec);
  if (ec) return {};
  const std::string inside = real.lexically_relative(root).generic_string();
  if (inside.empty() || has_parent_part(inside)) return {};
  return inside == "." ? "include" : "include/" + inside;
}

}  // namespace kiln::detail
