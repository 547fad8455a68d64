// NVRTC and nvJitLink, loaded with dlopen on first need so that a program that never JITs runs without them.
#pragma once

// nvJitLink.h wraps each entry point in a static inline function that calls the versioned symbol;
// kiln calls through its own table instead, so the wrappers must not be compiled.
#define NVJITLINK_NO_INLINE
#include <nvJitLink.h>
#include <nvrtc.h>

#include "chain/unit_key.hpp"  // LoadedCompilers

#include <string>

namespace kiln::detail {

// X-macros of the entry points kiln uses, each resolved by the exact symbol its header declares.
#define KILN_NVRTC_FUNCTIONS(X)  \
  X(nvrtcGetErrorString)         \
  X(nvrtcVersion)                \
  X(nvrtcCreateProgram)          \
  X(nvrtcDestroyProgram)         \
  X(nvrtcAddNameExpression)      \
  X(nvrtcCompileProgram)         \
  X(nvrtcGetLoweredName)         \
  X(nvrtcGetProgramLogSize)      \
  X(nvrtcGetProgramLog)          \
  X(nvrtcGetPTXSize)             \
  X(nvrtcGetPTX)                 \
  X(nvrtcGetCUBINSize)           \
  X(nvrtcGetCUBIN)               \
  X(nvrtcGetLTOIRSize)           \
  X(nvrtcGetLTOIR)               \
  X(nvrtcGetPCHCreateStatus)     \
  X(nvrtcGetPCHHeapSizeRequired) \
  X(nvrtcSetPCHHeapSize)

// nvJitLink's header binds each name to a symbol carrying the header's version (nvJitLinkCreate ->
// __nvJitLinkCreate_13_0); a member is named as the API is, and resolved by that symbol.
#define KILN_NVJITLINK_FUNCTIONS(X)                                  \
  X(nvJitLinkVersion, nvJitLinkVersion)                              \
  X(nvJitLinkCreate, __nvJitLinkCreate_13_0)                         \
  X(nvJitLinkDestroy, __nvJitLinkDestroy_13_0)                       \
  X(nvJitLinkAddData, __nvJitLinkAddData_13_0)                       \
  X(nvJitLinkComplete, __nvJitLinkComplete_13_0)                     \
  X(nvJitLinkGetLinkedCubinSize, __nvJitLinkGetLinkedCubinSize_13_0) \
  X(nvJitLinkGetLinkedCubin, __nvJitLinkGetLinkedCubin_13_0)         \
  X(nvJitLinkGetErrorLogSize, __nvJitLinkGetErrorLogSize_13_0)       \
  X(nvJitLinkGetErrorLog, __nvJitLinkGetErrorLog_13_0)               \
  X(nvJitLinkGetInfoLogSize, __nvJitLinkGetInfoLogSize_13_0)         \
  X(nvJitLinkGetInfoLog, __nvJitLinkGetInfoLog_13_0)

struct Nvrtc {
#define KILN_NVRTC_MEMBER(fn) decltype(&::fn) fn = nullptr;
  KILN_NVRTC_FUNCTIONS(KILN_NVRTC_MEMBER)
#undef KILN_NVRTC_MEMBER
  std::string version;  // "13.0"
};

struct NvJitLink {
#define KILN_NVJITLINK_MEMBER(fn, symbol) decltype(&::symbol) fn = nullptr;
  KILN_NVJITLINK_FUNCTIONS(KILN_NVJITLINK_MEMBER)
#undef KILN_NVJITLINK_MEMBER
  std::string version;  // "13.0"
};

// The process-wide tables: dlopen (libnvrtc.so.13, then libnvrtc.so; libnvJitLink.so.13, then
// libnvJitLink.so) on first call. Throw Error(no_compiler) saying what to do when a library or one of
// its symbols is missing; later calls rethrow the same error without retrying.
const Nvrtc& nvrtc();
const NvJitLink& nvjitlink();

// Loads both now if they can be (dlopen, RTLD_NOW: ~10-20 ms), and says nothing when they cannot: the
// first nvrtc() or nvjitlink() then throws as usual. What a worker does before its first request.
void preload_compilers() noexcept;

// Loads NVRTC and nvJitLink and says which versions and files they are, or why they cannot be loaded:
// what the disk cache records for cache keys (disk/compiler_versions.hpp).
Result<LoadedCompilers> load_compilers();

}  // namespace kiln::detail
