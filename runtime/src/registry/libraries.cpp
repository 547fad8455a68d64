// The process's libraries, by image: loaded once, shared by every device's registry, unloaded with the last.
#include "registry/libraries.hpp"

#include <kiln/driver.hpp>

#include <map>
#include <mutex>

namespace kiln::detail {
namespace {

struct Shared {
  CUlibrary library = nullptr;
  std::size_t users = 0;
};

struct Table {
  std::mutex mutex;
  std::map<std::string, Shared, std::less<>> by_image;
  std::map<CUlibrary, std::string> identity_of;
  LibraryStats stats;
};

Table& table() {
  // Leaked on purpose: registries may be destroyed during static destruction.
  static Table& t = *new Table;
  return t;
}

}  // namespace

CUlibrary acquire_library(const std::string& identity, const std::string& image, const std::string& what) {
  Table& t = table();
  std::lock_guard lock(t.mutex);
  Shared& shared = t.by_image[identity];
  if (shared.library == nullptr) {
    CUlibrary library = nullptr;
    const CUresult result = driver().cuLibraryLoadData(&library, image.data(), nullptr, nullptr, 0, nullptr, nullptr, 0);
    if (result != CUDA_SUCCESS) {
      t.by_image.erase(identity);
      check(result, "kiln: cuLibraryLoadData for " + what);
    }
    shared.library = library;
    t.identity_of[library] = identity;
    ++t.stats.loads;
  } else {
    ++t.stats.shared;
  }
  ++shared.users;
  t.stats.live = t.by_image.size();
  return shared.library;
}

void release_library(CUlibrary library) noexcept {
  if (library == nullptr) return;
  Table& t = table();
  std::lock_guard lock(t.mutex);
  const auto id = t.identity_of.find(library);
  if (id == t.identity_of.end()) return;
  const auto it = t.by_image.find(id->second);
  if (it != t.by_image.end() && --it->second.users == 0) {
    // Errors are ignored: at process exit the driver may already be shutting down.
    driver().cuLibraryUnload(library);
    t.by_image.erase(it);
    t.identity_of.erase(id);
  }
  t.stats.live = t.by_image.size();
}

LibraryStats library_stats_now() noexcept {
  Table& t = table();
  std::lock_guard lock(t.mutex);
  return t.stats;
}

}  // namespace kiln::detail
