// Loads NVRTC and nvJitLink at run time and resolves kiln's tables from them.
#include "jit/compiler/nvrtc_library.hpp"

#include "base/file_identity.hpp"

#include <kiln/error.hpp>

#include <dlfcn.h>

#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

namespace kiln::detail {
namespace {

// The outcome of the one attempt to load a library: the table, or the message every later call rethrows.
template <class Table>
struct Loaded {
  Table table;
  std::string failure;
};

// What a user without the library can do about it; `library` is the soname kiln looks for first.
std::string advice(std::string_view what, std::string_view library) {
  return "install the CUDA toolkit's " + std::string(what) + " (" + std::string(library) +
         ") or put it on LD_LIBRARY_PATH; or build kiln for this GPU's architecture";
}

struct Opened {
  void* handle = nullptr;
  std::string name;  // the soname that loaded, or every tried name with dlerror's reason
};

// Never dlclose'd: the library stays mapped for the life of the process, as it would if linked.
Opened open_first(std::initializer_list<const char*> sonames) {
  Opened out;
  for (const char* soname : sonames) {
    if (void* handle = dlopen(soname, RTLD_NOW | RTLD_LOCAL)) return {handle, soname};
    const char* why = dlerror();
    if (!out.name.empty()) out.name += "; ";
    out.name.append(why ? why : soname);
  }
  return out;
}

std::string version_text(unsigned major, unsigned minor) {
  return std::to_string(major) + "." + std::to_string(minor);
}

// Resolves `symbol` into `member`; false (and the failure message set) when the library lacks it.
template <class Table, class Member>
bool resolve(Loaded<Table>& loaded, const Opened& library, Member& member, const char* symbol,
             std::string_view what) {
  if (void* address = dlsym(library.handle, symbol)) {
    member = reinterpret_cast<Member>(address);
    return true;
  }
  loaded.failure = "kiln: cannot JIT-compile: " + library.name + " lacks " + symbol +
                   " (kiln was built against CUDA 13.0); " + advice(what, library.name);
  return false;
}

Loaded<Nvrtc> load_nvrtc() {
  Loaded<Nvrtc> loaded;
  const Opened library = open_first({"libnvrtc.so.13", "libnvrtc.so"});
  if (!library.handle) {
    loaded.failure = "kiln: cannot JIT-compile: NVRTC not found (" + library.name + "); " +
                     advice("NVRTC", "libnvrtc.so.13");
    return loaded;
  }
#define KILN_RESOLVE(fn) \
  if (!resolve(loaded, library, loaded.table.fn, #fn, "NVRTC")) return loaded;
  KILN_NVRTC_FUNCTIONS(KILN_RESOLVE)
#undef KILN_RESOLVE
  int major = 0;
  int minor = 0;
  loaded.table.nvrtcVersion(&major, &minor);
  loaded.table.version = version_text(static_cast<unsigned>(major), static_cast<unsigned>(minor));
  return loaded;
}

Loaded<NvJitLink> load_nvjitlink() {
  Loaded<NvJitLink> loaded;
  const Opened library = open_first({"libnvJitLink.so.13", "libnvJitLink.so"});
  if (!library.handle) {
    loaded.failure = "kiln: cannot JIT-compile: nvJitLink not found (" + library.name + "); " +
                     advice("nvJitLink", "libnvJitLink.so.13");
    return loaded;
  }
#define KILN_RESOLVE(fn, symbol) \
  if (!resolve(loaded, library, loaded.table.fn, #symbol, "nvJitLink")) return loaded;
  KILN_NVJITLINK_FUNCTIONS(KILN_RESOLVE)
#undef KILN_RESOLVE
  unsigned major = 0;
  unsigned minor = 0;
  loaded.table.nvJitLinkVersion(&major, &minor);
  loaded.table.version = version_text(major, minor);
  return loaded;
}

template <class Table>
const Table& table_or_throw(const Loaded<Table>& loaded) {
  if (!loaded.failure.empty()) throw Error(Errc::no_compiler, loaded.failure);
  return loaded.table;
}

}  // namespace

const Nvrtc& nvrtc() {
  // Leaked on purpose, like the driver table: compiles may still run during static destruction.
  static const Loaded<Nvrtc>& loaded = *new Loaded<Nvrtc>(load_nvrtc());
  return table_or_throw(loaded);
}

const NvJitLink& nvjitlink() {
  static const Loaded<NvJitLink>& loaded = *new Loaded<NvJitLink>(load_nvjitlink());
  return table_or_throw(loaded);
}

void preload_compilers() noexcept {
  try {
    (void)nvrtc();
  } catch (...) {  // remembered: the request that needs it says why
  }
  try {
    (void)nvjitlink();
  } catch (...) {
  }
}

Result<LoadedCompilers> load_compilers() {
  try {
    const Nvrtc& rtc = nvrtc();
    const NvJitLink& link = nvjitlink();
    const auto rtc_file = file_of(reinterpret_cast<const void*>(rtc.nvrtcVersion));
    const auto link_file = file_of(reinterpret_cast<const void*>(link.nvJitLinkVersion));
    if (!rtc_file || !link_file) return fail("cannot tell which files NVRTC and nvJitLink were loaded from (dladdr)");
    return LoadedCompilers{{rtc.version, link.version}, *rtc_file, *link_file};
  } catch (const Error& e) {
    return fail(e.what());
  }
}

}  // namespace kiln::detail
