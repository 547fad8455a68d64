// Compiles one unit for one architecture: NVRTC to PTX (or embedded PTX), unreferenced globals stripped,
// nvJitLink to a cubin.
#include "jit/compiler/compile.hpp"

#include "base/cubin_elf.hpp"
#include "jit/compiler/nvrtc_library.hpp"
#include "jit/compiler/ptx_strip.hpp"

#include <chrono>
#include <memory>
#include <optional>
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
  // The request's unit, or (linked) its link source; both see the unit's headers.
  Program(const Nvrtc& api, const CompileRequest& request, bool linked = false) : api_(api) {
    std::vector<const char*> names, contents;
    for (const Header& h : request.headers) {
      names.push_back(h.name.c_str());
      contents.push_back(h.content.c_str());
    }
    const std::string& source = linked ? request.link_source : request.source;
    const std::string& name = linked ? request.link_source_name : request.source_name;
    result_ = api.nvrtcCreateProgram(&program_, source.c_str(), name.c_str(), static_cast<int>(names.size()),
                                     contents.data(), names.data());
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

  // The cubin of a program compiled for a real architecture (binary: no terminating NUL to drop).
  std::string cubin() const {
    std::size_t size = 0;
    if (api_.nvrtcGetCUBINSize(program_, &size) != NVRTC_SUCCESS || size == 0) return {};
    std::string bytes(size, '\0');
    if (api_.nvrtcGetCUBIN(program_, bytes.data()) != NVRTC_SUCCESS) return {};
    return bytes;
  }

  // The LTO-IR of a program compiled with -dlto (binary: no terminating NUL to drop).
  std::string lto_ir() const {
    std::size_t size = 0;
    if (api_.nvrtcGetLTOIRSize(program_, &size) != NVRTC_SUCCESS || size == 0) return {};
    std::string bytes(size, '\0');
    if (api_.nvrtcGetLTOIR(program_, bytes.data()) != NVRTC_SUCCESS) return {};
    return bytes;
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

}  // namespace

// NVRTC's options: the unit's own, the virtual architecture, the PCH. -default-device makes functions
// without an execution space __device__ rather than rejected: nvcc accepts such functions in host-side
// declarations that device code never calls (CUB's tuning headers have them), and the build-time
// lowering (codegen/lowering.py) passes the same option.
std::vector<std::string> nvrtc_options(const CompileRequest& request, PchMode pch, bool minimal, bool cubin) {
  std::vector<std::string> options = request.options;
  options.push_back("-default-device");
  if (minimal) options.push_back("-minimal");
  if (cubin) {
    // NVRTC runs ptxas itself; on several threads where cores are free, as nvJitLink's would.
    options.push_back("-arch=sm_" + std::to_string(request.arch));
    if (request.link_threads != 1) options.push_back("-Xptxas=--split-compile=" + std::to_string(request.link_threads));
  } else {
    options.push_back("-arch=compute_" + std::to_string(request.code_arch != 0 ? request.code_arch : request.arch));
  }
  if (!request.link_source.empty()) options.push_back("-dlto");  // -rdc=true is a linked row's own option
  // Where cores are free, NVVM's optimizer runs a unit of many kernels on several threads (docs/DESIGN.md,
  // "Threads inside a unit"); never beside a PCH, whose options must stay those it was built with.
  if (request.link_threads != 1 && pch == PchMode::none && request.link_source.empty() &&
      request.kernels.size() >= kSplitOptimizerKernels)
    options.push_back("-split-compile=" + std::to_string(request.link_threads));
  if (pch == PchMode::create) options.push_back("--create-pch=" + request.pch_path);
  if (pch == PchMode::use) options.push_back("--use-pch=" + request.pch_path);
  return options;
}

// nvJitLink's options for `request`: the real architecture, LTO where it links a link source, threads.
std::vector<std::string> nvjitlink_options(const CompileRequest& request) {
  std::vector<std::string> options = {"-arch=sm_" + std::to_string(request.arch)};
  if (!request.link_source.empty()) {
    // Relocatable code keeps every global it defines; LTO may drop all but the unit's kernels and what
    // they use, as the PTX path's stripping does (docs/DESIGN.md, "Operators at run time").
    options.push_back("-lto");
    for (const CachedKernel& kernel : request.kernels) options.push_back("-kernels-used=" + kernel.lowered);
    options.push_back("-optimize-unused-variables");
  }
  // Where cores are free, ptxas compiles a unit's functions on several threads, and a link with LTO runs
  // NVVM's optimizer on several threads too (docs/DESIGN.md, "Threads inside a unit").
  if (request.link_threads != 1) {
    options.push_back("-Xptxas=--split-compile=" + std::to_string(request.link_threads));
    if (!request.link_source.empty()) options.push_back("-split-compile=" + std::to_string(request.link_threads));
  }
  return options;
}

namespace {

bool contains(const std::string& text, std::string_view what) { return text.find(what) != std::string::npos; }

// A unit that includes nothing: a table's has no headers in its bundle (the bundle holds every header its
// source includes); a program given at run time may include from its -I directories and the toolkit's
// CCCL, which the bundle does not hold, so its source is looked at too.
bool includes_nothing(const CompileRequest& request) {
  return request.headers.empty() && request.source.find("#include") == std::string::npos &&
         request.source.find("# include") == std::string::npos;
}

// Appends `line` to a compile log as a line of its own (nothing for an empty one).
void add_line(std::string& log, const std::string& line) {
  if (line.empty()) return;
  if (!log.empty()) log += '\n';
  log += line;
}

// Each step below returns its product or why it failed (base/result.hpp); compile_unit turns the first
// failure into the outcome's error.

// One NVRTC compile of the request's source with `pch`; the program, for its PTX and names.
struct Compiled {
  std::unique_ptr<Program> program;
  nvrtcResult result = NVRTC_SUCCESS;
  std::vector<std::string> options;
};
Result<Compiled> nvrtc_compile(const Nvrtc& api, const CompileRequest& request, PchMode pch, CompileOutcome& out,
                               bool minimal = false, bool cubin = false) {
  Compiled c;
  c.options = nvrtc_options(request, pch, minimal, cubin);
  c.program = std::make_unique<Program>(api, request);
  const std::string what = subject(request) + ": NVRTC ";
  if (c.program->created() != NVRTC_SUCCESS) {
    return fail(what + "could not create the program (" + api.nvrtcGetErrorString(c.program->created()) + ")");
  }
  for (const std::string& expression : request.expressions) {
    if (const nvrtcResult r = api.nvrtcAddNameExpression(c.program->get(), expression.c_str()); r != NVRTC_SUCCESS) {
      return fail(what + "rejected the name expression '" + expression + "' (" + api.nvrtcGetErrorString(r) + ")");
    }
  }
  std::vector<const char*> argv;
  for (const std::string& option : c.options) argv.push_back(option.c_str());
  const auto start = Clock::now();
  c.result = api.nvrtcCompileProgram(c.program->get(), static_cast<int>(argv.size()), argv.data());
  out.nvrtc_ms += ms_since(start);
  out.log += c.program->log();
  return c;
}

// NVRTC, with every name expression checked against the lowered name the catalog recorded. A PCH only
// ever costs speed: a compile that failed with one (cannot open, cannot write) is compiled without, one
// NVRTC rejects it compiles without by itself (docs/DESIGN.md, "PCH across processes").
//
// A unit that includes nothing is compiled with NVRTC's -minimal first (no declarations of the CUDA
// runtime's API, textures or device-side launch to parse: the trivial unit's NVRTC ~4-10 ms faster,
// docs/DESIGN.md); one whose source needs them fails that compile and is compiled again without.
Result<Compiled> compile_source(const Nvrtc& api, const CompileRequest& request, CompileOutcome& out,
                                bool cubin = false) {
  Compiled c;
  bool compiled = false;
  if (includes_nothing(request) && request.pch == PchMode::none && request.link_source.empty()) {
    CompileOutcome trial;
    Result<Compiled> minimal = nvrtc_compile(api, request, PchMode::none, trial, true, cubin);
    if (!minimal) return fail(minimal.error());
    c = std::move(minimal).value();
    out.nvrtc_ms += trial.nvrtc_ms;
    compiled = c.result == NVRTC_SUCCESS;
    if (compiled) out.log += trial.log;
  }
  if (!compiled) {
    Result<Compiled> full = nvrtc_compile(api, request, request.pch, out, false, cubin);
    if (!full) return fail(full.error());
    c = std::move(full).value();
  }
  if (request.pch != PchMode::none && c.result != NVRTC_SUCCESS) {
    // A compile with a PCH that failed (a PCH file that cannot be read, or written: "error while writing
    // PCH file: No space left on device") is compiled again without one: no unit fails because of a PCH.
    // Its log keeps why, for the pool's warning; a unit that fails again fails on its own.
    out.pch = PchResult::failed;
    out.log = "kiln: compiled again without the precompiled header " + request.pch_path + ", after:\n" + out.log;
    Result<Compiled> without = nvrtc_compile(api, request, PchMode::none, out, false, cubin);
    if (!without) return fail(without.error());
    c = std::move(without).value();
  } else if (request.pch == PchMode::use) {
    out.pch = contains(out.log, "incompatible precompiled header") ? PchResult::rejected : PchResult::used;
  } else if (request.pch == PchMode::create) {
    out.pch = api.nvrtcGetPCHCreateStatus(c.program->get()) == NVRTC_SUCCESS ? PchResult::created : PchResult::failed;
  }
  const std::string what = subject(request) + ": NVRTC ";
  const std::string with_options = "; options: " + joined(c.options, " ");
  if (c.result != NVRTC_SUCCESS) {
    return fail(what + "failed (" + api.nvrtcGetErrorString(c.result) + ")" + with_options);
  }
  out.lowered.clear();
  for (std::size_t k = 0; k < request.expressions.size(); ++k) {
    const std::string& expression = request.expressions[k];
    const char* lowered = nullptr;
    if (const nvrtcResult r = api.nvrtcGetLoweredName(c.program->get(), expression.c_str(), &lowered);
        r != NVRTC_SUCCESS || !lowered) {
      return fail(what + "has no lowered name for '" + expression + "' (" + api.nvrtcGetErrorString(r) + ")" +
                  with_options);
    }
    if (request.kernels[k].lowered.empty()) {
      // A program given at run time: its lowered names are learnt here, and recorded in its entry.
      out.lowered.emplace_back(lowered);
      continue;
    }
    if (request.kernels[k].lowered != lowered) {
      return fail(subject(request) + ": NVRTC lowers " + expression + " to " + lowered + ", the catalog recorded " +
                  request.kernels[k].lowered + with_options);
    }
  }
  return c;
}

// The unit's source to PTX.
Result<std::string> compile_to_ptx(const Nvrtc& api, const CompileRequest& request, CompileOutcome& out) {
  const Result<Compiled> c = compile_source(api, request, out);
  if (!c) return fail(c.error());
  std::string ptx = c->program->ptx();
  if (ptx.empty()) return fail(subject(request) + ": NVRTC produced no PTX; options: " + joined(c->options, " "));
  return ptx;
}

// The unit's source straight to a cubin: NVRTC runs ptxas itself.
Result<std::string> compile_to_cubin(const Nvrtc& api, const CompileRequest& request, CompileOutcome& out) {
  const Result<Compiled> c = compile_source(api, request, out, true);
  if (!c) return fail(c.error());
  std::string cubin = c->program->cubin();
  if (cubin.empty()) return fail(subject(request) + ": NVRTC produced no cubin; options: " + joined(c->options, " "));
  return cubin;
}

// The unit's source to LTO-IR (its options carry -dlto).
Result<std::string> compile_to_lto_ir(const Nvrtc& api, const CompileRequest& request, CompileOutcome& out) {
  const Result<Compiled> c = compile_source(api, request, out);
  if (!c) return fail(c.error());
  std::string ir = c->program->lto_ir();
  if (ir.empty()) return fail(subject(request) + ": NVRTC produced no LTO-IR; options: " + joined(c->options, " "));
  return ir;
}

// The link source to LTO-IR, with the unit's options and headers. Its text goes into the failure: it is
// the caller's (an operator given at run time), short, and what NVRTC's log points into.
Result<std::string> compile_link_source(const Nvrtc& api, const CompileRequest& request, CompileOutcome& out) {
  std::vector<std::string> options = nvrtc_options(request, PchMode::none);
  Program program(api, request, true);
  const std::string what = subject(request) + ": NVRTC ";
  if (program.created() != NVRTC_SUCCESS) {
    return fail(what + "could not create the program " + request.link_source_name + " (" +
                api.nvrtcGetErrorString(program.created()) + ")");
  }
  std::vector<const char*> argv;
  for (const std::string& option : options) argv.push_back(option.c_str());
  const auto start = Clock::now();
  const nvrtcResult result = api.nvrtcCompileProgram(program.get(), static_cast<int>(argv.size()), argv.data());
  out.nvrtc_ms += ms_since(start);
  add_line(out.log, program.log());
  if (result != NVRTC_SUCCESS) {
    return fail(what + "failed on " + request.link_source_name + " (" + api.nvrtcGetErrorString(result) +
                "); options: " + joined(options, " ") + "\n--- " + request.link_source_name + " ---\n" +
                request.link_source + "\n--- NVRTC's log follows ---");
  }
  std::string ir = program.lto_ir();
  if (ir.empty()) return fail(what + "produced no LTO-IR for " + request.link_source_name);
  return ir;
}

// One input of nvJitLink's: PTX, LTO-IR, or a fatbin of LTO-IR.
struct LinkInput {
  nvJitLinkInputType type;
  const std::string& bytes;
  std::string name;
};

// nvJitLink assembles the (stripped) PTX, or links the LTO-IR, into a cubin for the real architecture.
// `refused`, when given, says which input nvJitLink refused (nvJitLinkAddData), if that is why it failed.
Result<std::string> link_to_cubin(const NvJitLink& api, const CompileRequest& request,
                                  const std::vector<LinkInput>& inputs, CompileOutcome& out,
                                  std::optional<std::size_t>* refused = nullptr) {
  const std::vector<std::string> options = nvjitlink_options(request);
  const std::string what = subject(request) + ": nvJitLink ";
  const std::string with_options = "; options: " + joined(options, " ");
  const auto start = Clock::now();
  Linker linker(api, options);
  if (linker.created() != NVJITLINK_SUCCESS) {
    out.log += linker.log();
    return fail(what + "could not start (" + link_result_name(linker.created()) + ")" + with_options);
  }
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const LinkInput& input = inputs[i];
    const nvJitLinkResult added =
        api.nvJitLinkAddData(linker.get(), input.type, input.bytes.data(), input.bytes.size(), input.name.c_str());
    if (added != NVJITLINK_SUCCESS) {
      out.link_ms += ms_since(start);
      add_line(out.log, linker.log());
      if (refused != nullptr) *refused = i;
      return fail(what + "refused " + input.name + " (" + link_result_name(added) + ")" + with_options);
    }
  }
  nvJitLinkResult result = api.nvJitLinkComplete(linker.get());
  std::size_t size = 0;
  if (result == NVJITLINK_SUCCESS) result = api.nvJitLinkGetLinkedCubinSize(linker.get(), &size);
  std::string cubin(size, '\0');
  if (result == NVJITLINK_SUCCESS) result = api.nvJitLinkGetLinkedCubin(linker.get(), cubin.data());
  out.link_ms += ms_since(start);
  add_line(out.log, linker.log());
  if (result != NVJITLINK_SUCCESS) {
    return fail(what + "failed (" + link_result_name(result) + ")" + with_options);
  }
  return cubin;
}

// The cubin must be for the requested architecture and define every kernel, or the registry could
// not use it: better an error naming the unit now than a failed load later.
// `missing_kernel`, when given, says whether a kernel was what it lacked.
Status check_cubin(const CompileRequest& request, const std::vector<CachedKernel>& kernels, const std::string& cubin,
                   bool* missing_kernel = nullptr) {
  const Cubin parsed = read_cubin(std::string_view(cubin));
  const std::string what = subject(request) + ": nvJitLink's cubin ";
  if (!parsed.ok()) return fail(what + "is unreadable: " + parsed.error);
  if (parsed.arch != request.arch) return fail(what + "is for sm_" + std::to_string(parsed.arch));
  for (const CachedKernel& kernel : kernels) {
    if (!parsed.defines(kernel.lowered)) {
      if (missing_kernel != nullptr) *missing_kernel = true;
      return fail(what + "lacks kernel " + kernel.lowered);
    }
  }
  return ok();
}

// The unit's cubin, by the path its request takes; `embedded_ir` and `straight` say which.
Result<std::string> build_cubin(const Nvrtc* rtc, const NvJitLink& link, const CompileRequest& request,
                                CompileOutcome& out, bool& embedded_ir, bool& straight) {
  const bool from_ptx = !request.ptx.empty();
  if (request.expressions.size() != request.kernels.size()) {
    return fail(subject(request) + ": the request has " + std::to_string(request.kernels.size()) + " kernels but " +
                std::to_string(request.expressions.size()) + " name expressions");
  }
  if (!request.link_source.empty()) {
    if (from_ptx) return fail(subject(request) + ": a linked unit is compiled from its source, not from PTX");
    // The link source first: its errors are the caller's, and need no unit compiled to show.
    Result<std::string> linked_ir = request.link_lto_ir ? Result<std::string>(request.link_source)
                                                        : compile_link_source(*rtc, request, out);
    if (!linked_ir) return linked_ir;
    const LinkInput linked_input{NVJITLINK_INPUT_LTOIR, *linked_ir, request.link_source_name + ".ltoir"};
    if (!request.unit_lto_ir.empty()) {
      std::optional<std::size_t> refused;
      bool missing_kernel = false;
      Result<std::string> cubin = link_to_cubin(
          link, request, {{NVJITLINK_INPUT_FATBIN, request.unit_lto_ir, request.source_name + ".ltoir.fatbin"}, linked_input},
          out, &refused);
      const Status checked = cubin ? check_cubin(request, request.kernels, *cubin, &missing_kernel) : fail(cubin.error());
      if (checked) {
        embedded_ir = true;
        return cubin;
      }
      if (refused && *refused != 0) return fail(checked.error());
      if (refused) {
        // LTO-IR of a newer toolkit than this nvJitLink, or damaged: the unit's source gives the same code.
        add_line(out.log, checked.error() + "; compiling the unit's source instead");
      } else if (missing_kernel) {
        // nvcc named a kernel otherwise than NVRTC (a type each spells differently): the source's are right.
        add_line(out.log, checked.error() + " (from the unit's embedded LTO-IR); compiling the unit's source instead");
      } else {
        return fail(checked.error());
      }
    }
    const Result<std::string> unit_ir = compile_to_lto_ir(*rtc, request, out);
    if (!unit_ir) return unit_ir;
    return link_to_cubin(link, request, {{NVJITLINK_INPUT_LTOIR, *unit_ir, request.source_name + ".ltoir"}, linked_input},
                         out);
  }
  if (!from_ptx && includes_nothing(request)) {
    // A unit that includes nothing has none of CCCL's unreferenced globals to strip (docs/DESIGN.md,
    // "Lean cubins"): NVRTC makes its cubin itself, without PTX text written, read back and assembled
    // by nvJitLink (docs/DESIGN.md, "A unit that includes nothing").
    straight = true;
    return compile_to_cubin(*rtc, request, out);
  }
  Result<std::string> ptx = from_ptx ? Result<std::string>(request.ptx) : compile_to_ptx(*rtc, request, out);
  if (!ptx) return ptx;
  StrippedPtx stripped = strip_unreferenced_globals(*ptx);
  out.globals_removed = stripped.removed;
  return link_to_cubin(link, request, {{NVJITLINK_INPUT_PTX, stripped.ptx, request.source_name + ".ptx"}}, out);
}

}  // namespace

CompileOutcome compile_unit(const CompileRequest& request) {
  CompileOutcome out;
  const bool from_ptx = !request.ptx.empty();
  // Both libraries before any work: a missing nvJitLink must not cost a compile before it shows.
  const Nvrtc* rtc = from_ptx ? nullptr : &nvrtc();
  const NvJitLink& link = nvjitlink();
  CacheEntry entry;
  bool embedded_ir = false;  // a linked unit's kernels came from the binary's LTO-IR
  bool straight = false;     // NVRTC made the cubin itself
  Result<std::string> cubin = build_cubin(rtc, link, request, out, embedded_ir, straight);
  std::vector<CachedKernel> kernels = request.kernels;
  if (cubin && !out.lowered.empty()) {
    // The names NVRTC lowered, in the order of the kernels whose names were not known before.
    std::size_t next = 0;
    for (CachedKernel& k : kernels)
      if (k.lowered.empty() && next < out.lowered.size()) k.lowered = out.lowered[next++];
  }
  const Status checked = cubin ? check_cubin(request, kernels, *cubin) : fail(cubin.error());
  if (!checked) {
    out.entry = fail(checked.error());
    return out;
  }
  entry.cubin = std::move(cubin).value();
  entry.arch = request.arch;
  entry.kernels = std::move(kernels);
  entry.options = joined(request.options, "\n");  // as the catalog writes a unit's options
  entry.compiler = straight ? "nvrtc " + rtc->version + ", its own cubin"
                   : (from_ptx ? "embedded PTX" : "nvrtc " + rtc->version) + " + nvjitlink " + link.version +
                         (request.link_source.empty()
                              ? ", " + std::to_string(out.globals_removed) + " unreferenced globals stripped"
                              : ", LTO with " + request.link_source_name +
                                    (embedded_ir ? std::string(", the unit's embedded LTO-IR") : std::string()));
  out.entry = std::move(entry);
  return out;
}

}  // namespace kiln::detail
