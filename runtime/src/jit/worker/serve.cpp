// A compile worker's loop: hello, then one answer per request, until the end of its input.
#include "jit/worker/serve.hpp"

#include "base/parse.hpp"     // KILN_JIT_PCH, read as the host reads it
#include "base/settings.hpp"  // KILN_JITD_HOST, KILN_JIT_MEMORY, KILN_JIT_PCH

#include "jit/pch_pack.hpp"
#include "jit/pch_store.hpp"
#include "jit/pool/settings.hpp"  // KILN_JIT_MEMORY
#include "jit/protocol.hpp"

#include <kiln/error.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <string>

namespace kiln::detail {

namespace {

int quit(const std::string& what) {
  std::fprintf(stderr, "kiln-jitd[%ld]: %s\n", static_cast<long>(::getpid()), what.c_str());
  return 2;
}

using Clock = std::chrono::steady_clock;

// What a message adds when a compile ran out of memory: the limit it ran under.
std::string memory_hint() {
  return " (a JIT worker may allocate " + describe_memory_limit(worker_memory_limit()) + ": KILN_JIT_MEMORY)";
}

bool says_out_of_memory(std::string_view text) {
  for (const std::string_view s : {"OUT_OF_MEMORY", "out of memory", "Memory allocation failure", "bad_alloc"})
    if (text.find(s) != std::string_view::npos) return true;
  return false;
}

// The request's packed PCH file, unpacked into memory for NVRTC: the host's copy where the request
// names one and this worker can open it, else unpacked here (in a child process). The worker keeps the
// PCH it opened last while its requests go on reading the same file (the pool sends a worker that read
// a family's PCH only that family's again, or a request without one), so a second use costs nothing.
// `unpacked_here` says whether this call unpacked it.
Result<std::string> unpack_for(const CompileRequest& request, UnpackedPch& kept, bool& unpacked_here) {
  const std::filesystem::path packed = request.pch_path;
  struct stat st {};
  if (::stat(packed.c_str(), &st) == 0 && kept.same_file(st)) return kept.path();
  kept = UnpackedPch();  // its memory back before the next is unpacked
  if (!request.pch_unpacked.empty()) {
    // Not openable where the host is not dumpable (its /proc/<pid>/fd is root's) or has dropped the
    // copy: then this worker unpacks the file as it would without one.
    if (Result<UnpackedPch> shared = UnpackedPch::open_unpacked(request.pch_unpacked, packed)) {
      kept = std::move(shared).value();
      return kept.path();
    }
  }
  unpacked_here = true;
  Result<UnpackedPch> opened = UnpackedPch::open(packed, pch_threads());
  if (!opened) return fail(opened.error());
  kept = std::move(opened).value();
  return kept.path();
}

// The outcome of one request. NVRTC writes a PCH it is asked to create into a temp file next to the
// request's path; the worker packs and publishes it there (sum first, then the file), or says in the log
// why not. A PCH it is asked to use is opened or unpacked into memory first; one that cannot be is not
// used (the unit compiles without, and the log says why, as for a file NVRTC cannot read).
std::string answer(const CompileFunction& compile, CompileRequest request, UnpackedPch& kept) {
  try {
    std::filesystem::path final_path;
    if (request.pch == PchMode::create) {
      final_path = request.pch_path;
      request.pch_path = pch_temp_path(final_path).string();
    }
    if (request.pch != PchMode::use) kept = UnpackedPch();
    double unpack_ms = 0;
    bool unpacked_here = false;
    std::string unpack_failure;
    if (request.pch == PchMode::use) {
      const auto start = Clock::now();
      Result<std::string> path = unpack_for(request, kept, unpacked_here);
      unpack_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
      if (path) {
        request.pch_path = std::move(path).value();
      } else {
        unpack_failure = "kiln: compiled without the precompiled header " + request.pch_path + ", which could not be unpacked: " + path.error() + "\n";
        request.pch = PchMode::none;
        request.pch_path.clear();
      }
    }
    request.pch_unpacked.clear();  // the compiler reads pch_path, now this process's own
    CompileOutcome outcome = compile(request);
    // NVRTC's time with a PCH includes opening or unpacking it: what using the file costs.
    outcome.nvrtc_ms += unpack_ms;
    if (unpacked_here) outcome.pch_unpack_ms = unpack_ms;
    if (!unpack_failure.empty()) {
      outcome.pch = PchResult::failed;
      outcome.log = unpack_failure + outcome.log;
    }
    if (request.pch == PchMode::create) {
      if (outcome.pch == PchResult::created) {
        if (const Status published = publish_pch(request.pch_path, final_path); !published) {
          outcome.pch = PchResult::failed;
          outcome.log += "kiln: the precompiled header was not kept: " + published.error() + "\n";
        }
      } else {
        // First, so that the pool's warning quotes it rather than NVRTC's line before it.
        if (const std::string why = pch_write_failure(outcome.log, request.pch_path); !why.empty())
          outcome.log = why + "\n" + outcome.log;
        std::error_code ignored;
        std::filesystem::remove(request.pch_path, ignored);
      }
    }
    if (!outcome.entry && (says_out_of_memory(outcome.entry.error()) || says_out_of_memory(outcome.log)))
      outcome.entry = fail(outcome.entry.error() + memory_hint());
    return encode_outcome(outcome);
  } catch (const std::bad_alloc&) {
    return encode_failure({true, static_cast<std::uint32_t>(Errc::compile),
                           "kiln: the JIT worker ran out of memory compiling unit " + request.registry + "/" + request.unit +
                               memory_hint()});
  } catch (const kiln::Error& e) {
    return encode_failure({true, static_cast<std::uint32_t>(e.code()), e.what()});
  } catch (const std::exception& e) {
    return encode_failure({false, 0, e.what()});
  }
}

}  // namespace

void die_with_host() {
  const std::string host = setting(kHostPidVariable);
  if (host.empty()) return;  // started by hand, not by a pool
  // Set before the check: a host that dies after it sends the signal; one that died before it is
  // seen by the check (the worker was re-parented).
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (std::to_string(::getppid()) != host) std::_Exit(3);
}

void limit_worker_memory() {
  // The host warned about a value it cannot read (JitPool); here it is the default, quietly.
  const Result<std::uint64_t> asked = jit_memory_from(setting("KILN_JIT_MEMORY").c_str());
  const std::uint64_t bytes = asked ? *asked : kDefaultWorkerMemory;
  if (bytes == 0 || !kWorkerMemoryLimited) return;
  rlimit limit{};
  if (::getrlimit(RLIMIT_DATA, &limit) != 0) return;
  // Never above a hard limit set from outside (a lower one stays).
  const rlim_t wanted = limit.rlim_max == RLIM_INFINITY ? bytes : std::min<rlim_t>(bytes, limit.rlim_max);
  if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur <= wanted) return;
  limit.rlim_cur = wanted;
  ::setrlimit(RLIMIT_DATA, &limit);
}

std::uint64_t worker_memory_limit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_DATA, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return 0;
  return limit.rlim_cur;
}

bool aslr_off() {
  const int persona = ::personality(0xffffffff);
  return persona != -1 && (persona & ADDR_NO_RANDOMIZE) != 0;
}

void relaunch_without_aslr(char** argv) {
  // KILN_JIT_PCH off: no PCH files, so ASLR stays on (the host reads the variable by the same rule).
  const Result<bool> pch_on = parse_switch(setting("KILN_JIT_PCH"));
  const int persona = ::personality(0xffffffff);
  if ((pch_on.ok() && !*pch_on) || persona == -1 || (persona & ADDR_NO_RANDOMIZE) != 0) return;
  if (::personality(static_cast<unsigned long>(persona | ADDR_NO_RANDOMIZE)) == -1) return;
  ::execv("/proc/self/exe", argv);
  ::personality(static_cast<unsigned long>(persona));  // exec failed: go on as started
}

int serve_compile_requests(int in, int out, const CompileFunction& compile) {
  // Every file the worker makes (NVRTC's PCH, written under the umask) is private from its creation, as
  // every file of the cache is (0600), not only once it is published.
  ::umask(077);
  if (out == STDOUT_FILENO) {
    out = ::fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
    if (out < 0 || ::dup2(STDERR_FILENO, STDOUT_FILENO) < 0) return quit("cannot move the frame stream off stdout");
  }
  if (const auto w = write_frame(out, encode_hello({::getpid(), kCacheFormatVersion, aslr_off()})); w.status != IoStatus::ok)
    return quit("sending hello: " + w.error);
  UnpackedPch kept;
  for (;;) {
    const FrameRead read = read_frame(in);
    if (read.status == IoStatus::end_of_stream) return 0;
    if (read.status != IoStatus::ok) return quit("reading a request: " + read.error);
    const auto message = open_frame(read.frame);
    if (!message) return quit("reading a request: " + message.error());
    if (message->kind != MessageKind::request)
      return quit("expected a request, got message kind " + std::to_string(static_cast<unsigned>(message->kind)));
    auto request = decode_request(message->body);
    if (!request) return quit(request.error());
    const std::string unit = request->unit;
    if (const auto w = write_frame(out, answer(compile, std::move(request).value(), kept)); w.status != IoStatus::ok)
      return quit("sending the outcome of unit " + unit + ": " + w.error);
  }
}

}  // namespace kiln::detail
