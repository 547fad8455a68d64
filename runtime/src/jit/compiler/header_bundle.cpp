// Unpacks a catalog's zstd header bundle into a directory tree, once per bundle.
#include "jit/compiler/header_bundle.hpp"

#include <kiln/error.hpp>

#include <zstd.h>

#include <fcntl.h>
#include <unistd.h>

#include <fstream>
#include <mutex>
#include <random>
#include <system_error>

namespace kiln::detail {
namespace {

// The catalog's bundle is missing or damaged: Errc::catalog; the directory cannot be written: Errc::cache.
[[noreturn]] void fail(Errc code, const Catalog& catalog, const std::string& what) {
  throw Error(code, "kiln: cannot unpack the header bundle of registry '" + std::string(catalog.name) +
                        "' for the JIT tier: " + what);
}

std::string random_suffix() {
  std::random_device device;
  return std::to_string(::getpid()) + "." + std::to_string(device());
}

}  // namespace

std::filesystem::path unpack_headers(const Catalog& catalog, const std::filesystem::path& base) {
  if (catalog.header_bundle_digest.empty() || catalog.header_bundle_size == 0)
    fail(Errc::catalog, catalog, "the catalog carries no headers (was it generated without a toolkit?)");
  const std::filesystem::path final_dir = base / "headers" / std::string(catalog.header_bundle_digest);
  std::error_code ec;
  if (std::filesystem::is_directory(final_dir, ec)) return final_dir;
  // One thread of this process unpacks; the others (precompile's, warm-up's) wait and re-check rather
  // than each decompressing and writing megabytes of headers. Other processes race by rename.
  static std::mutex unpacking;
  std::lock_guard lock(unpacking);
  if (std::filesystem::is_directory(final_dir, ec)) return final_dir;

  std::string raw(catalog.header_bundle_raw_size, '\0');
  const std::size_t got =
      ZSTD_decompress(raw.data(), raw.size(), catalog.header_bundle, catalog.header_bundle_size);
  if (ZSTD_isError(got)) fail(Errc::catalog, catalog, std::string("zstd: ") + ZSTD_getErrorName(got));
  if (got != raw.size()) fail(Errc::catalog, catalog, "the bundle decompresses to " + std::to_string(got) + " bytes, expected " +
                                           std::to_string(raw.size()));

  std::filesystem::create_directories(base / "headers", ec);
  if (ec) fail(Errc::cache, catalog, "creating " + (base / "headers").string() + ": " + ec.message());
  // Built with append, not "." + ...: g++ 12 warns falsely (-Wrestrict) about the latter.
  std::string temp_name = ".";
  temp_name.append(catalog.header_bundle_digest).append(".tmp.").append(random_suffix());
  const std::filesystem::path temp = base / "headers" / temp_name;
  for (const HeaderEntry& h : catalog.headers) {
    if (std::size_t{h.offset} + h.size > raw.size()) fail(Errc::catalog, catalog, "a header lies outside the bundle");
    const std::filesystem::path file = temp / std::string(catalog.str(h.path));
    std::filesystem::create_directories(file.parent_path(), ec);
    std::ofstream out(file, std::ios::binary);
    out.write(raw.data() + h.offset, h.size);
    if (!out) {
      std::filesystem::remove_all(temp, ec);
      fail(Errc::cache, catalog, "writing " + file.string());
    }
  }
  // Another thread or process may have unpacked the same bundle meanwhile: theirs is as good as ours.
  std::filesystem::rename(temp, final_dir, ec);
  if (ec) {
    std::error_code ignored;
    std::filesystem::remove_all(temp, ignored);
    if (!std::filesystem::is_directory(final_dir, ignored)) fail(Errc::cache, catalog, "renaming into " + final_dir.string() + ": " + ec.message());
  }
  return final_dir;
}

std::vector<std::string> include_dirs(const Catalog& catalog, const UnitEntry& unit,
                                      const std::filesystem::path& unpacked) {
  std::vector<std::string> dirs;
  const std::string_view roots = catalog.str(unit.roots);
  std::size_t start = 0;
  while (start < roots.size()) {
    const std::size_t comma = std::min(roots.find(',', start), roots.size());
    std::string root = "r";
    root.append(roots.substr(start, comma - start));
    dirs.push_back((unpacked / root).string());
    start = comma + 1;
  }
  return dirs;
}

}  // namespace kiln::detail
