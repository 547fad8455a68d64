// A stand-in libnvrtc.so.13 that only says its version: FAKE_NVRTC_VERSION ("13.9"), read when asked, as an
// upgraded NVRTC would report another one. Every entry point kiln resolves exists; none but nvrtcVersion
// and nvrtcGetErrorString does anything (kiln never compiles with it: the tests only compute keys).
#include <cstdio>
#include <cstdlib>

extern "C" {

__attribute__((visibility("default"))) int nvrtcVersion(int* major, int* minor) {
  const char* version = std::getenv("FAKE_NVRTC_VERSION");
  if (version == nullptr || std::sscanf(version, "%d.%d", major, minor) != 2) {
    *major = 13;
    *minor = 99;
  }
  return 0;
}

__attribute__((visibility("default"))) const char* nvrtcGetErrorString(int) { return "fake NVRTC: not a compiler"; }

#define KILN_FAKE(name) \
  __attribute__((visibility("default"))) int name() { return 7; /* NVRTC_ERROR_BUILTIN_OPERATION_FAILURE */ }
KILN_FAKE(nvrtcCreateProgram)
KILN_FAKE(nvrtcDestroyProgram)
KILN_FAKE(nvrtcAddNameExpression)
KILN_FAKE(nvrtcCompileProgram)
KILN_FAKE(nvrtcGetLoweredName)
KILN_FAKE(nvrtcGetProgramLogSize)
KILN_FAKE(nvrtcGetProgramLog)
KILN_FAKE(nvrtcGetPTXSize)
KILN_FAKE(nvrtcGetPTX)
KILN_FAKE(nvrtcGetCUBINSize)
KILN_FAKE(nvrtcGetCUBIN)
KILN_FAKE(nvrtcGetLTOIRSize)
KILN_FAKE(nvrtcGetLTOIR)
KILN_FAKE(nvrtcGetPCHCreateStatus)
KILN_FAKE(nvrtcGetPCHHeapSizeRequired)
KILN_FAKE(nvrtcSetPCHHeapSize)
#undef KILN_FAKE

}  // extern "C"
