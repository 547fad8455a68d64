// A file's identity: stat of a path, or of the shared object a symbol was loaded from.
#include "base/file_identity.hpp"

#include <dlfcn.h>
#include <sys/stat.h>

namespace kiln::detail {

std::optional<FileIdentity> identify_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return FileIdentity{path, static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino),
                      static_cast<std::uint64_t>(st.st_size),
                      static_cast<std::uint64_t>(st.st_mtim.tv_sec) * 1'000'000'000ull +
                          static_cast<std::uint64_t>(st.st_mtim.tv_nsec)};
}

std::optional<FileIdentity> file_of(const void* symbol) {
  Dl_info info{};
  if (::dladdr(symbol, &info) == 0 || info.dli_fname == nullptr) return std::nullopt;
  return identify_file(info.dli_fname);
}

}  // namespace kiln::detail
