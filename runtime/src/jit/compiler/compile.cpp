// Compiles one unit for one architecture: NVRTC to PTX, unreferenced globals stripped, nvJitLink to a cubin.
#include "jit/compiler/compile.hpp"
#include "jit/compiler/pch_dir.hpp"

#include "base/cubin_elf.hpp"
#include "jit/compiler/nvrtc_library.hpp"
#include "jit/compiler/ptx_strip.hpp"

#include <chrono>
#include <filesystem>
#include <string_view>
#include <system_error>
#include <utility>

namespace kiln::detail {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

std::string joined(const std::vector<std::string>& items, std::string_view separator) {
  std::string out;
  for (const std::string& item : items) {
    if (!out.empty()) out += separator;
    out += item;
  }
  return out;
}

// "examples/block_sum_f32 (examples.block_sum_f32.cu) for sm_90": what every error message starts with.
std::string subject(const CompileRequest& request) {
  return request.registry + "/" + request.unit + " (" + request.source_name + ") for sm_" +
         std::to_string(request.arch);
}

const char* link_result_name(nvJitLinkResult result) {
  switch (result) {
    case NVJITLINK_SUCCESS: return "NVJITLINK_SUCCESS";
    case NVJITLINK_ERROR_UNRECOGNIZED_OPTION: return "NVJITLINK_ERROR_UNRECOGNIZED_OPTION";
    case NVJITLINK_ERROR_MISSING_ARCH: return "NVJITLINK_ERROR_MISSING_ARCH";
    case NVJITLINK_ERROR_INVALID_INPUT: return "NVJITLINK_ERROR_INVALID_INPUT";
    case NVJITLINK_ERROR_PTX_COMPILE: return "NVJITLINK_ERROR_PTX_COMPILE";
    case NVJITLINK_ERROR_NVVM_COMPILE: return "NVJITLINK_ERROR_NVVM_COMPILE";
    case NVJITLINK_ERROR_INTERNAL: return "NVJITLINK_ERROR_INTERNAL";
    case NVJITLINK_ERROR_THREADPOOL: return "NVJITLINK_ERROR_THREADPOOL";
    case NVJITLINK_ERROR_UNRECOGNIZED_INPUT: return "NVJITLINK_ERROR_UNRECOGNIZED_INPUT";
    case NVJITLINK_ERROR_FINALIZE: return "NVJITLINK_ERROR_FINALIZE";
    case NVJITLINK_ERROR_NULL_INPUT: return "NVJITLINK_ERROR_NULL_INPUT";
    case NVJITLINK_ERROR_INCOMPATIBLE_OPTIONS: return "NVJITLINK_ERROR_INCOMPATIBLE_OPTIONS";
    case NVJITLINK_ERROR_INCORRECT_INPUT_TYPE: return "NVJITLINK_ERROR_INCORRECT_INPUT_TYPE";
    case NVJITLINK_ERROR_ARCH_MISMATCH: return "NVJITLINK_ERROR_ARCH_MISMATCH";
    case NVJITLINK_ERROR_OUTDATED_LIBRARY: return "NVJITLINK_ERROR_OUTDATED_LIBRARY";
    case NVJITLINK_ERROR_MISSING_FATBIN: return "NVJITLINK_ERROR_MISSING_FATBIN";
    case NVJITLINK_ERROR_UNRECOGNIZED_ARCH: return "NVJITLINK_ERROR_UNRECOGNIZED_ARCH";
    case NVJITLINK_ERROR_UNSUPPORTED_ARCH: return "NVJITLINK_ERROR_UNSUPPORTED_ARCH";
    case NVJITLINK_ERROR_LTO_NOT_ENABLED: return "NVJITLINK_ERROR_LTO_NOT_ENABLED";
  }
  return "unknown nvJitLinkResult";
}

// An NVRTC program, destroyed on every path out.
class Program {
 public:
  Program(const Nvrtc& api, const CompileRequest& request) : api_(api) {
    result_ = api.nvrtcCreateProgram(&program_, request.source.c_str(), request.source_name.c_str(), 0, nullptr,
                                     nullptr);
  }
  ~Program() {
    if (program_) api_.nvrtcDestroyProgram(&program_);
  }
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;

  nvrtcResult created() const noexcept { return result_; }
  nvrtcProgram get() const noexcept { return program_; }

  std::string log() const {
    std::size_t size = 0;
    if (api_.nvrtcGetProgramLogSize(program_, &size) != NVRTC_SUCCESS || size <= 1) return {};
    std::string text(size, '\0');
    if (api_.nvrtcGetProgramLog(program_, text.data()) != NVRTC_SUCCESS) return {};
    text.resize(size - 1);  // the size counts the terminating NUL
    return text;
  }

  std::string ptx() const {
    std::size_t size = 0;
    if (api_.nvrtcGetPTXSize(program_, &size) != NVRTC_SUCCESS || size == 0) return {};
    std::string text(size, '\0');
    if (api_.nvrtcGetPTX(program_, text.data()) != NVRTC_SUCCESS) return {};
    text.resize(size - 1);
    return text;
  }

 private:
  const Nvrtc& api_;
  nvrtcProgram program_ = nullptr;
  nvrtcResult result_ = NVRTC_SUCCESS;
};

// An nvJitLink handle, destroyed on every path out.
class Linker {
 public:
  Linker(const NvJitLink& api, const std::vector<std::string>& options) : api_(api) {
    std::vector<const char*> argv;
    for (const std::string& option : options) argv.push_back(option.c_str());
    result_ = api.nvJitLinkCreate(&handle_, static_cast<std::uint32_t>(argv.size()), argv.data());
  }
  ~Linker() {
    if (handle_) api_.nvJitLinkDestroy(&handle_);
  }
  Linker(const Linker&) = delete;
  Linker& operator=(const Linker&) = delete;

  nvJitLinkResult created() const noexcept { return result_; }
  nvJitLinkHandle get() const noexcept { return handle_; }

  // The error log, then the info log: what nvJitLink said, in one text.
  std::string log() const {
    if (!handle_) return {};
    std::string out = read(api_.nvJitLinkGetErrorLogSize, api_.nvJitLinkGetErrorLog);
    const std::string info = read(api_.nvJitLinkGetInfoLogSize, api_.nvJitLinkGetInfoLog);
    if (!out.empty() && !info.empty()) out += '\n';
    return out + info;
  }

 private:
  template <class SizeFn, class ReadFn>
  std::string read(SizeFn size_of, ReadFn read_into) const {
    std::size_t size = 0;
    if (size_of(handle_, &size) != NVJITLINK_SUCCESS || size <= 1) return {};
    std::string text(size, '\0');
    if (read_into(handle_, text.data()) != NVJITLINK_SUCCESS) return {};
    text.resize(size - 1);
    return text;
  }

  const NvJitLink& api_;
  nvJitLinkHandle handle_ = nullptr;
  nvJitLinkResult result_ = NVJITLINK_SUCCESS;
};

// NVRTC's options: the unit's own, its include directories, the virtual architecture, the PCH.
// -default-device makes functions without an execution space __device__ rather than rejected: nvcc
// accepts such functions in host-side declarations that device code never calls (CUB's tuning headers
// have them), and the build-time lowering (codegen/lowering.py) passes the same option.
std::vector<std::string> nvrtc_options(const CompileRequest& request, const std::string& pch_dir) {
  std::vector<std::string> options = request.options;
  options.push_back("-default-device");
  for (const std::string& dir : request.include_dirs) options.push_back("-I" + dir);
  options.push_back("-arch=compute_" + std::to_string(request.arch));
  if (!pch_dir.empty()) {
    options.push_back("-pch");
    options.push_back("-pch-dir=" + pch_dir);
  }
  return options;
}

// A unit whose headers outgrow NVRTC's PCH heap (256 MiB by default; the CUB example needs 168 MiB)
// compiles without a PCH. Growing the heap to what it needed lets the next compile of its family build
// one; it discards the PCHs already made, so it is done only when one could not be.
void grow_pch_heap_if_exhausted(const Nvrtc& api, const Program& program, std::string& log) {
  std::size_t needed = 0;
  if (api.nvrtcGetPCHCreateStatus(program.get()) != NVRTC_ERROR_PCH_CREATE_HEAP_EXHAUSTED ||
      api.nvrtcGetPCHHeapSizeRequired(program.get(), &needed) != NVRTC_SUCCESS || needed == 0) {
    return;
  }
  if (api.nvrtcSetPCHHeapSize(needed) == NVRTC_SUCCESS) {
    log += "kiln: the PCH heap was too small for this unit; grown to " + std::to_string(needed >> 20) + " MiB\n";
  }
}

struct Failure {
  std::string error;
};

// NVRTC to PTX, with every name expression checked against the lowered name the catalog recorded.
std::string compile_to_ptx(const Nvrtc& api, const CompileRequest& request, CompileOutcome& out) {
  const std::string pch_dir = private_pch_dir(request.pch_dir, out.log);
  const std::vector<std::string> options = nvrtc_options(request, pch_dir);
  const std::string what = subject(request) + ": NVRTC ";
  const std::string with_options = "; options: " + joined(options, " ");

  Program program(api, request);
  if (program.created() != NVRTC_SUCCESS) {
    throw Failure{what + "could not create the program (" + api.nvrtcGetErrorString(program.created()) + ")"};
  }
  for (const std::string& expression : request.expressions) {
    if (const nvrtcResult r = api.nvrtcAddNameExpression(program.get(), expression.c_str()); r != NVRTC_SUCCESS) {
      throw Failure{what + "rejected the name expression '" + expression + "' (" + api.nvrtcGetErrorString(r) + ")"};
    }
  }
  std::vector<const char*> argv;
  for (const std::string& option : options) argv.push_back(option.c_str());
  const auto start = Clock::now();
  const nvrtcResult compiled = api.nvrtcCompileProgram(program.get(), static_cast<int>(argv.size()), argv.data());
  out.nvrtc_ms = ms_since(start);
  out.log += program.log();
  if (!pch_dir.empty()) grow_pch_heap_if_exhausted(api, program, out.log);
  if (compiled != NVRTC_SUCCESS) {
    throw Failure{what + "failed (" + api.nvrtcGetErrorString(compiled) + ")" + with_options};
  }

  for (std::size_t k = 0; k < request.expressions.size(); ++k) {
    const std::string& expression = request.expressions[k];
    const char* lowered = nullptr;
    if (const nvrtcResult r = api.nvrtcGetLoweredName(program.get(), expression.c_str(), &lowered);
        r != NVRTC_SUCCESS || !lowered) {
      throw Failure{what + "has no lowered name for '" + expression + "' (" + api.nvrtcGetErrorString(r) + ")" +
                    with_options};
    }
    if (request.kernels[k].lowered != lowered) {
      throw Failure{subject(request) + ": NVRTC lowers " + expression + " to " + lowered +
                    ", the catalog recorded " + request.kernels[k].lowered + with_options};
    }
  }
  std::string ptx = program.ptx();
  if (ptx.empty()) throw Failure{what + "produced no PTX" + with_options};
  return ptx;
}

// nvJitLink assembles the (stripped) PTX into a cubin for the real architecture.
std::string link_to_cubin(const NvJitLink& api, const CompileRequest& request, const std::string& ptx,
                          CompileOutcome& out) {
  const std::vector<std::string> options = {"-arch=sm_" + std::to_string(request.arch)};
  const std::string what = subject(request) + ": nvJitLink ";
  const std::string with_options = "; options: " + joined(options, " ");
  const auto start = Clock::now();
  Linker linker(api, options);
  if (linker.created() != NVJITLINK_SUCCESS) {
    out.log += linker.log();
    throw Failure{what + "could not start (" + link_result_name(linker.created()) + ")" + with_options};
  }
  const std::string input_name = request.source_name + ".ptx";
  nvJitLinkResult result = api.nvJitLinkAddData(linker.get(), NVJITLINK_INPUT_PTX, ptx.data(), ptx.size(),
                                                input_name.c_str());
  if (result == NVJITLINK_SUCCESS) result = api.nvJitLinkComplete(linker.get());
  std::size_t size = 0;
  if (result == NVJITLINK_SUCCESS) result = api.nvJitLinkGetLinkedCubinSize(linker.get(), &size);
  std::string cubin(size, '\0');
  if (result == NVJITLINK_SUCCESS) result = api.nvJitLinkGetLinkedCubin(linker.get(), cubin.data());
  out.link_ms = ms_since(start);
  const std::string log = linker.log();
  if (!log.empty()) out.log += (out.log.empty() ? "" : "\n") + log;
  if (result != NVJITLINK_SUCCESS) {
    throw Failure{what + "failed (" + link_result_name(result) + ")" + with_options};
  }
  return cubin;
}

// The cubin must be for the requested architecture and define every kernel, or the registry could
// not use it: better an error naming the unit now than a failed load later.
void check_cubin(const CompileRequest& request, const std::string& cubin) {
  const Cubin parsed = read_cubin(std::string_view(cubin));
  const std::string what = subject(request) + ": nvJitLink's cubin ";
  if (!parsed.ok()) throw Failure{what + "is unreadable: " + parsed.error};
  if (parsed.arch != request.arch) throw Failure{what + "is for sm_" + std::to_string(parsed.arch)};
  for (const CachedKernel& kernel : request.kernels) {
    if (!parsed.defines(kernel.lowered)) throw Failure{what + "lacks kernel " + kernel.lowered};
  }
}

}  // namespace

PtxStage compile_ptx_stage(const CompileRequest& request) {
  // Both libraries first: a missing nvJitLink must not cost a compile before it is noticed.
  (void)nvjitlink();
  return nvrtc_stage(request);
}

PtxStage nvrtc_stage(const CompileRequest& request) {
  const Nvrtc& rtc = nvrtc();
  PtxStage stage;
  CompileOutcome& out = stage.outcome;
  try {
    if (request.expressions.size() != request.kernels.size()) {
      throw Failure{subject(request) + ": the request has " + std::to_string(request.kernels.size()) +
                    " kernels but " + std::to_string(request.expressions.size()) + " name expressions"};
    }
    StrippedPtx stripped = strip_unreferenced_globals(compile_to_ptx(rtc, request, out));
    out.globals_removed = stripped.removed;
    stage.ptx = std::move(stripped.ptx);
    out.entry = CacheEntry{};  // the stage succeeded; the link fills it in
  } catch (Failure& failure) {
    out.entry = fail(std::move(failure.error));
    stage.ptx.clear();
  }
  return stage;
}

CompileOutcome link_stage(const CompileRequest& request, PtxStage stage) {
  CompileOutcome out = std::move(stage.outcome);
  if (!out.entry) return out;
  const Nvrtc& rtc = nvrtc();
  const NvJitLink& link = nvjitlink();
  CacheEntry entry;
  try {
    entry.cubin = link_to_cubin(link, request, stage.ptx, out);
    check_cubin(request, entry.cubin);
  } catch (Failure& failure) {
    out.entry = fail(std::move(failure.error));
    return out;
  }
  entry.arch = request.arch;
  entry.kernels = request.kernels;
  entry.options = joined(request.options, "\n");  // as the catalog writes a unit's options
  entry.compiler = "nvrtc " + rtc.version + " + nvjitlink " + link.version + ", " +
                   std::to_string(out.globals_removed) + " unreferenced globals stripped";
  out.entry = std::move(entry);
  return out;
}

CompileOutcome compile_unit(const CompileRequest& request) { return link_stage(request, compile_ptx_stage(request)); }

}  // namespace kiln::detail
