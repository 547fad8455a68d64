// A program's digest: its content, with include directories taken by the bytes of their files.
#include "program/program_key.hpp"

#include "chain/key.hpp"  // Sha256, sha256_hex

#include <kiln/error.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <system_error>

namespace kiln::detail {
namespace {

}  // namespace

Result<std::string> directory_digest(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return fail("'" + dir + "' is not a directory");
  std::vector<fs::path> files;
  for (fs::recursive_directory_iterator it(dir, fs::directory_options::none, ec), end; !ec && it != end;
       it.increment(ec)) {
    if (it->is_regular_file(ec)) files.push_back(it->path());
    if (files.size() > kMaxIncludeFiles)
      return fail("'" + dir + "' holds more than " + std::to_string(kMaxIncludeFiles) + " files");
  }
  if (ec) return fail("cannot list '" + dir + "': " + ec.message());
  std::sort(files.begin(), files.end());
  Sha256 digest;
  std::uint64_t total = 0;
  std::string buffer;
  for (const fs::path& file : files) {
    std::ifstream in(file, std::ios::binary);
    if (!in) return fail("cannot read '" + file.string() + "'");
    std::ostringstream bytes;
    bytes << in.rdbuf();
    buffer = bytes.str();
    total += buffer.size();
    if (total > kMaxIncludeBytes)
      return fail("'" + dir + "' holds more than " + std::to_string(kMaxIncludeBytes >> 20) + " MiB of files");
    std::string head;
    append_field(head, "file", fs::relative(file, dir, ec).generic_string());
    head += std::to_string(buffer.size()) + "\n";
    digest.update(head.data(), head.size());
    digest.update(buffer.data(), buffer.size());
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
  for (std::size_t i = 0; i < options.size(); ++i) {
    // An include directory counts by what is in it, so that two checkouts or machines share the key.
    std::string dir;
    if ((options[i] == "-I" || options[i] == "--include-path") && i + 1 < options.size()) {
      dir = options[++i];
    } else if (options[i].starts_with("--include-path=")) {
      dir = options[i].substr(15);
    } else if (options[i].starts_with("-I")) {
      dir = options[i].substr(2);
    } else {
      append_field(text, "option", options[i]);
      continue;
    }
    const Result<std::string> files = remembered_directory_digest(dir);
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
    const char* env = std::getenv("KILN_TOOLKIT");
    const std::filesystem::path toolkit = env != nullptr && *env != '\0' ? env : "/usr/local/cuda";
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

}  // namespace kiln::detail
