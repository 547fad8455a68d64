// kiln-jitd keeps the CUDA driver out of its process.
//
// NVRTC 13.0 loads libcuda.so.1 and calls cuInit inside nvrtcCompileProgram (nvJitLink does too, for its
// compute cache), though neither needs a GPU to compile. Where a driver is installed that costs ~0.2 s
// per worker (measured on an H100 host: a first small compile 257 ms with the driver, 33 ms without),
// and starts threads and GPU state a compile worker has no use for.
//
// So this executable defines dlopen, which comes first in the symbol lookup of every library it loads
// (the executable exports it): a request for libcuda fails as it does on a host with no driver, which
// NVRTC and nvJitLink handle (they compile the same; nvJitLink skips its cache). Everything else goes
// to the C library's dlopen. Only kiln-jitd has this: libkiln and the processes that use it see the
// driver as usual.
#include <dlfcn.h>

#include <cstring>

namespace {

bool names_libcuda(const char* file) {
  if (file == nullptr) return false;
  const char* slash = std::strrchr(file, '/');
  const char* base = slash != nullptr ? slash + 1 : file;
  return std::strncmp(base, "libcuda.so", 10) == 0;
}

using DlopenFn = void* (*)(const char*, int);

DlopenFn real_dlopen() {
  static const DlopenFn real = reinterpret_cast<DlopenFn>(dlsym(RTLD_NEXT, "dlopen"));
  return real;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) void* dlopen(const char* file, int mode) {
  const DlopenFn real = real_dlopen();
  if (real == nullptr) return nullptr;
  // A name that cannot be found, so that dlerror() says why as it would for a missing driver.
  if (names_libcuda(file)) return real("libcuda.so.1-hidden-from-kiln-jitd", mode);
  return real(file, mode);
}
