// Loads libcuda.so.1 at run time and resolves kiln's driver table from it.
#include <kiln/driver.hpp>
#include <kiln/error.hpp>

#include <dlfcn.h>
#include <link.h>

#include <string>
#include <utility>

namespace kiln {
namespace {

// The outcome of the one attempt to load the driver: the table, or the error every later call rethrows.
struct DriverState {
  Driver table;
  bool ok = false;
  Errc code = Errc::no_driver;
  std::string message;
};

std::string cuda_version_text(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

// "CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected"; the number alone if the driver cannot name it.
std::string describe(const Driver& table, CUresult result) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (table.cuGetErrorName) table.cuGetErrorName(result, &name);
  if (table.cuGetErrorString) table.cuGetErrorString(result, &text);
  std::string out = name ? name : "CUresult " + std::to_string(static_cast<int>(result));
  if (text) out.append(": ").append(text);
  return out;
}

// The file a dlopen'ed library was loaded from, as the loader found it.
std::string loaded_path(void* library) {
  link_map* map = nullptr;
  if (dlinfo(library, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name && *map->l_name) return map->l_name;
  return "libcuda.so.1";
}

DriverState fail(Errc code, std::string message) {
  DriverState state;
  state.code = code;
  state.message = std::move(message);
  return state;
}

DriverState driver_too_old(std::string_view symbol) {
  return fail(Errc::no_driver, "kiln: the CUDA driver is too old (it lacks " + std::string(symbol) +
                                   "; kiln was built with CUDA " + cuda_version_text(CUDA_VERSION) +
                                   "); update the NVIDIA driver to run kernels");
}

// The exact symbol cuda.h binds `fn` to: "cuMemAlloc_v2" for cuMemAlloc, "cuCtxSynchronize" for cuCtxSynchronize.
#define KILN_SYMBOL(fn) KILN_SYMBOL_TEXT(fn)
#define KILN_SYMBOL_TEXT(fn) #fn

DriverState load_driver() {
  // Never dlclose'd: the driver stays mapped for the life of the process, as it would if linked.
  void* library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    const char* why = dlerror();
    return fail(Errc::no_driver, std::string("kiln: no CUDA driver (libcuda.so.1 not found: ") +
                                     (why ? why : "unknown reason") +
                                     "); install the NVIDIA driver to run kernels");
  }
  DriverState state;
  // Resolved by the versioned symbol cuda.h declares, so each pointer's type and its ABI agree by construction.
  // cuGetProcAddress(base name, CUDA_VERSION) does not guarantee that: with CUDA 13.0 it returns the v13000
  // cuCtxSynchronize, which takes a CUcontext, for cuda.h's argument-less cuCtxSynchronize.
#define KILN_RESOLVE(fn)                                                       \
  if (void* symbol = dlsym(library, KILN_SYMBOL(fn))) {                        \
    state.table.fn = reinterpret_cast<decltype(state.table.fn)>(symbol);       \
  } else {                                                                     \
    return driver_too_old(KILN_SYMBOL(fn));                                    \
  }
  KILN_DRIVER_FUNCTIONS(KILN_RESOLVE)
#undef KILN_RESOLVE
#undef KILN_SYMBOL
#undef KILN_SYMBOL_TEXT

  if (const CUresult result = state.table.cuInit(0); result != CUDA_SUCCESS) {
    if (result == CUDA_ERROR_STUB_LIBRARY) {
      // The toolkit's link-time stub (lib64/stubs/libcuda.so) answers every call with this: a stubs
      // directory on the library path hides the driver (the stub cannot name the error itself).
      return fail(Errc::no_driver, "kiln: the libcuda.so.1 loaded is the CUDA toolkit's stub library (" +
                                       loaded_path(library) + "), not the NVIDIA driver (cuInit: CUDA_ERROR_STUB_LIBRARY, "
                                       "CUresult 34): a stubs directory is on the library path; remove it from "
                                       "LD_LIBRARY_PATH (or the linker's run path) so the driver's libcuda.so.1 is found");
    }
    const std::string advice = result == CUDA_ERROR_NO_DEVICE
                                   ? "check that a GPU is present and visible (nvidia-smi, CUDA_VISIBLE_DEVICES)"
                                   : "check the NVIDIA driver installation (nvidia-smi)";
    return fail(Errc::no_device, "kiln: no usable CUDA device (cuInit: " + describe(state.table, result) + "); " +
                                     advice);
  }
  state.ok = true;
  return state;
}

const DriverState& state() {
  // Leaked on purpose: registries destroyed during static destruction still need the table.
  static const DriverState& loaded = *new DriverState(load_driver());
  return loaded;
}

}  // namespace

const Driver& driver() {
  const DriverState& loaded = state();
  if (!loaded.ok) throw Error(loaded.code, loaded.message);
  return loaded.table;
}

bool driver_available() noexcept {
  try {
    return state().ok;
  } catch (...) {  // only std::bad_alloc can escape the first load
    return false;
  }
}

void check(CUresult result, std::string_view what) {
  if (result == CUDA_SUCCESS) return;
  throw Error(Errc::driver, std::string(what) + ": " + describe(state().table, result));
}

}  // namespace kiln
