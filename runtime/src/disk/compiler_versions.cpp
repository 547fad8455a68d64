// The compilers' versions for cache keys, from the record in the cache directory or by loading them once.
#include "disk/compiler_versions.hpp"

#include "base/private_dir.hpp"
#include "base/unique_fd.hpp"
#include "disk/cache_state.hpp"
#include "disk/files.hpp"

#include <kiln/error.hpp>

#include <cuda.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <charconv>
#include <cstdlib>
#include <mutex>

namespace kiln::detail {

namespace {

constexpr std::string_view kRecordHeader = "kiln compilers record 1\n";
constexpr std::size_t kMaxRecordBytes = 16 * 1024;  // a few hundred bytes; a larger file is not kiln's record
constexpr const char* kLoaderCache = "/etc/ld.so.cache";
// The sonames dlopen is asked for first (jit/compiler/nvrtc_library.cpp).
constexpr const char* kNvrtcSoname = "libnvrtc.so.13";
constexpr const char* kNvJitLinkSoname = "libnvJitLink.so.13";

CompilerVersions toolkit_versions() {
  const std::string toolkit = std::to_string(CUDA_VERSION / 1000) + "." + std::to_string(CUDA_VERSION % 1000 / 10);
  return {toolkit, toolkit};
}

std::string identity_line(std::string_view name, const FileIdentity& f) {
  return std::string(name) + "=" + std::to_string(f.device) + " " + std::to_string(f.inode) + " " + std::to_string(f.size) +
         " " + std::to_string(f.mtime_ns) + " " + f.path + "\n";
}

// "dev ino size mtime path" (the path last: it may hold spaces).
std::optional<FileIdentity> parse_identity(std::string_view text) {
  FileIdentity f;
  for (std::uint64_t* field : {&f.device, &f.inode, &f.size, &f.mtime_ns}) {
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *field);
    if (ec != std::errc() || end == text.data() + text.size() || *end != ' ') return std::nullopt;
    text.remove_prefix(static_cast<std::size_t>(end - text.data()) + 1);
  }
  if (text.empty()) return std::nullopt;
  f.path = std::string(text);
  return f;
}

// Where dlopen would find `soname` through LD_LIBRARY_PATH, if there.
std::optional<std::string> on_library_path(std::string_view soname, std::string_view library_path) {
  while (!library_path.empty()) {
    const auto colon = library_path.find(':');
    const std::string_view dir = library_path.substr(0, colon);
    library_path = colon == std::string_view::npos ? std::string_view{} : library_path.substr(colon + 1);
    if (dir.empty()) continue;
    std::string candidate = std::string(dir) + "/" + std::string(soname);
    struct stat st {};
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode)) return candidate;
  }
  return std::nullopt;
}

// Whether the loader would still load `recorded` for `soname`: the same file, and no other first on
// LD_LIBRARY_PATH (a library dropped into a directory listed there since).
bool still_found(const FileIdentity& recorded, std::string_view soname, const LoaderSearch& search) {
  if (identify_file(recorded.path) != recorded) return false;
  const auto listed = on_library_path(soname, search.library_path);
  return !listed || identify_file(*listed) == recorded;
}

std::optional<std::string> read_record(int dir) {
  const UniqueFd fd(::openat(dir, kCompilersRecordName, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  struct stat st {};
  if (!fd.valid() || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || !vet_private_file(st, kCompilersRecordName) ||
      static_cast<std::uint64_t>(st.st_size) > kMaxRecordBytes)
    return std::nullopt;
  std::string text(static_cast<std::size_t>(st.st_size), '\0');
  if (::read(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size())) return std::nullopt;
  return text;
}

}  // namespace

LoaderSearch loader_search_now() {
  const char* path = std::getenv("LD_LIBRARY_PATH");
  return {path == nullptr ? std::string() : std::string(path), identify_file(kLoaderCache)};
}

std::string encode_compilers_record(const LoaderSearch& search, const LoadedCompilers& loaded) {
  std::string out(kRecordHeader);
  out += "ld_library_path=" + search.library_path + "\n";
  out += search.cache_file ? identity_line("ld_so_cache", *search.cache_file) : "ld_so_cache=none\n";
  out += "nvrtc=" + loaded.versions.nvrtc + "\n";
  out += identity_line("nvrtc_file", loaded.nvrtc);
  out += "nvjitlink=" + loaded.versions.nvjitlink + "\n";
  out += identity_line("nvjitlink_file", loaded.nvjitlink);
  return out;
}

std::optional<std::pair<LoaderSearch, LoadedCompilers>> decode_compilers_record(std::string_view text) {
  if (!text.starts_with(kRecordHeader)) return std::nullopt;
  text.remove_prefix(kRecordHeader.size());
  // Exactly these lines, in this order: anything else is not a record this version wrote.
  const auto line = [&](std::string_view name) -> std::optional<std::string_view> {
    const auto eol = text.find('\n');
    if (eol == std::string_view::npos || !text.starts_with(name) || text.substr(name.size(), 1) != "=") return std::nullopt;
    const std::string_view value = text.substr(name.size() + 1, eol - name.size() - 1);
    text.remove_prefix(eol + 1);
    return value;
  };
  LoaderSearch search;
  LoadedCompilers loaded;
  const auto library_path = line("ld_library_path");
  const auto cache_file = library_path ? line("ld_so_cache") : std::nullopt;
  const auto nvrtc_version = cache_file ? line("nvrtc") : std::nullopt;
  const auto nvrtc_file = nvrtc_version ? line("nvrtc_file") : std::nullopt;
  const auto link_version = nvrtc_file ? line("nvjitlink") : std::nullopt;
  const auto link_file = link_version ? line("nvjitlink_file") : std::nullopt;
  if (!link_file || !text.empty()) return std::nullopt;
  search.library_path = std::string(*library_path);
  if (*cache_file != "none") {
    search.cache_file = parse_identity(*cache_file);
    if (!search.cache_file) return std::nullopt;
  }
  const auto rtc = parse_identity(*nvrtc_file);
  const auto link = parse_identity(*link_file);
  if (!rtc || !link || nvrtc_version->empty() || link_version->empty()) return std::nullopt;
  loaded.versions = {std::string(*nvrtc_version), std::string(*link_version)};
  loaded.nvrtc = *rtc;
  loaded.nvjitlink = *link;
  return std::pair{std::move(search), std::move(loaded)};
}

CompilerVersions compiler_versions_at(int dir, const std::function<Result<LoadedCompilers>()>& load) {
  std::optional<std::pair<LoaderSearch, LoadedCompilers>> record;
  if (dir >= 0) {
    if (const auto text = read_record(dir)) record = decode_compilers_record(*text);
  }
  const LoaderSearch search = loader_search_now();
  if (record && record->first == search && still_found(record->second.nvrtc, kNvrtcSoname, search) &&
      still_found(record->second.nvjitlink, kNvJitLinkSoname, search))
    return record->second.versions;  // a disk hit's way: a few stats, no dlopen
  const auto loaded = load();
  if (loaded) {
    // Best effort: a read-only cache still serves, at the price of this load in every process.
    if (dir >= 0 && search.library_path.find('\n') == std::string::npos)
      (void)publish_named(dir, kCompilersRecordName, kCompilersRecordName, encode_compilers_record(search, *loaded));
    return loaded->versions;
  }
  // Nothing loads: entries already on disk were built by what the record names, if anything.
  return record ? record->second.versions : toolkit_versions();
}

CompilerVersions compiler_versions(DiskCache& cache, LoadCompilers load) {
  // Leaked on purpose, like the library tables: keys may be computed during static destruction.
  static std::mutex& mutex = *new std::mutex;
  static std::optional<CompilerVersions>& known = *new std::optional<CompilerVersions>;
  std::lock_guard lock(mutex);
  if (known) return *known;
  std::optional<PrivateDir> dir;
  if (cache.usable()) {
    if (auto opened = CacheAccess::of(cache).open(false); opened && *opened) dir = std::move(**opened);
  }
  known = compiler_versions_at(dir ? dir->fd.get() : -1, load);
  return *known;
}

}  // namespace kiln::detail
