// Programs given at run time: CUDA source, headers, options and name expressions in, kernels out, served
// through the same tiers as a spec table's unit (memory, disk, remote, JIT), under a key of their content.
//
//   kiln::ProgramSource src{.source = text, .name_expressions = {"scale<float>"}, .label = "filters"};
//   auto program = kiln::program(src);                 // found by its content when given again
//   kiln::Kernel k = program->get("scale<float>");     // JIT once, then disk (any process), then memory
//
// Every call here throws kiln::Error and nothing else (std::bad_alloc aside); each says which codes below.
// An answer that is not the thing asked for is a Reason (kiln/error.hpp): a LoadPlan's, a PrecompileResult's.
#pragma once

#include <kiln/config.hpp>  // C++20, checked first

#include <kiln/registry.hpp>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

struct Catalog;
struct PrecompileResult;

// A header the source includes, given in memory under the name its #include uses ("filters/ops.cuh").
struct ProgramHeader {
  std::string name;
  std::string source;
};

struct ProgramSource {
  std::string source;                          // CUDA C++
  std::vector<ProgramHeader> headers;          // given in memory
  // NVRTC options from an allowlist (docs/programs.md), without -arch (kiln picks the device's): -D, -U,
  // -std=, --use_fast_math, -I<dir>, ...; none that names a file to write or read. An -I directory is
  // keyed by the contents of every file under it, never by its path; the toolkit's own CCCL headers (CUB,
  // Thrust, libcu++) are searched after them, keyed by their version. An include kiln cannot key (an
  // absolute path, a ".." out of its directories, a macro, a file in the working directory) is refused.
  std::vector<std::string> options;
  std::vector<std::string> name_expressions;   // the kernels, as C++ names: "saxpy", "scale<float>"
  // Caps: source and headers 64 MiB together, 1,024 name expressions of 16 KiB each.
  std::string label;                           // what messages call it; not part of the key
};

class Program;
namespace detail {
bool has_content(const Program& program, const ProgramSource& source);  // program/program_cache.hpp
}  // namespace detail

// One program for one device: the registry of its one unit. Thread-safe.
class Program {
 public:
  // Prefer kiln::program(), which finds a program of the same content made before. Throws
  // kiln::Error(invalid_argument), naming the label and what is wrong, for input it refuses: an option off
  // the allowlist, an include it cannot key, a size over a cap, an include directory it cannot read.
  Program(const ProgramSource& source, int device = 0, RegistryOptions options = {});
  ~Program();
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;

  // The kernel of one of the name expressions: the first call asks the tiers (the disk cache, the remote
  // cache, then the JIT, which compiles it once across threads, processes and machines and publishes it);
  // later calls are a lock-free read. Throws kiln::Error: compile (the label, options and NVRTC's full
  // log; a compile no thread could be started for), unknown_kernel (an expression the program does not
  // name), no_driver, no_device or driver (the GPU), no_compiler (NVRTC or nvJitLink missing and no cache
  // has it), no_binary (the JIT off, RegistryOptions::use_jit, and no cache has it). The Kernel holds the
  // program's registry (Kernel::keeps_loaded): its module stays loaded, and its names valid, while a copy
  // of it lives, after the program is dropped or kiln::program() forgot it.
  Kernel get(std::string_view name_expression);
  // Where get() would take it from, without loading: throws kiln::Error(unknown_kernel) only; what would
  // fail get() is the plan's reason.
  LoadPlan plan(std::string_view name_expression);

  // The program compiled for `arch` into its disk cache (and remote cache), without a GPU: found there,
  // fetched from the fleet, or compiled; a result whose error says why the cache did not keep it (a disk
  // cache not in use, say). Throws kiln::Error: compile with NVRTC's log when it does not build (or no
  // thread could be started for it), no_compiler without NVRTC.
  PrecompileResult precompile(unsigned arch);

  // How long its compile is expected to take on one thread, in milliseconds: the time its last compile
  // took (any architecture), kept in its disk cache's directory, else a guess from its size. What the
  // JIT pool orders programs by (compile_all). Throws nothing but std::bad_alloc.
  double estimate_ms() const;

  const std::string& label() const noexcept;
  // SHA-256 (hex) of everything that changes the binary: the source, each header's name and bytes, the
  // options (an -I directory as its files' contents), the name expressions. The cache key adds the
  // architecture, the compilers' versions, CCCL's and the format.
  const std::string& digest() const noexcept;
  Registry& registry() noexcept;
  const Catalog& catalog() const noexcept;

  struct Tables;  // the catalog of its one unit, made in memory (defined inside the library)

 private:
  friend bool detail::has_content(const Program&, const ProgramSource&);
  // Its registry with them: what each Kernel it hands out holds (Kernel::keeps_loaded).
  std::shared_ptr<Tables> tables_;
};

// Many programs compiled at once, as a table's units are: their units are handed to the JIT pool
// together, longest first by their estimates (each one's size, then the time its last compile took, kept in
// the cache directory), so that the pool orders them and gives the longest the critical path's threads.
//  - arch 0: every kernel of each program made ready on its device (as get() of each name expression);
//  - arch N: each compiled for sm_N into its disk cache (and remote cache), no GPU needed (precompile).
// Waits for all of them. One result per program, in their order (`unit` is its label); a program that
// failed has ok false and its Reason (compile: the label, options and NVRTC's log; invalid_argument: a null
// program). Throws nothing else: a thread that cannot be started leaves its share to the threads there are.
std::vector<PrecompileResult> compile_all(const std::vector<std::shared_ptr<Program>>& programs, unsigned arch = 0);

// The program of this content for `device`, made on first use and kept: handing in the same text again
// finds it by content (no key is hashed then). At most KILN_PROGRAM_CACHE programs (1,024) are kept, the
// least recently used that nobody else holds forgotten first; one forgotten is made again when asked for
// (from the disk cache, where it compiled before). A program lives while a handle to it does; a Kernel
// it handed out keeps what it launches through loaded by itself (Program::get), so a kernel kept without
// its program stays launchable. Programs with other options (RegistryOptions) are other programs. Throws
// kiln::Error(invalid_argument) as the Program constructor does.
std::shared_ptr<Program> program(const ProgramSource& source, int device = 0, RegistryOptions options = {});

}  // namespace kiln
