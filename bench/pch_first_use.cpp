// A PCH's first use per worker: the CUB example compiled against its family's PCH through NVRTC's plain
// file, against the packed file unpacked once by the host (its workers open the host's copy) and the
// packed file unpacked by each worker; each compile on a fresh kiln-jitd, in alternating pairs
// (`bench_pch_first_use [pairs] [sm]`, 5 and 90). Needs no GPU (NVRTC only). Prints a Markdown table of
// medians (docs/DESIGN.md, "PCH files at rest").
#include <kiln/catalog.hpp>

#include "examples_catalog.hpp"
#include "jit/pch_pack.hpp"
#include "jit/pch_store.hpp"
#include "jit/pool/host_pch.hpp"
#include "jit/pool/settings.hpp"
#include "jit/pool/worker_process.hpp"
#include "jit/request.hpp"

#include "bench_util.hpp"

#include <algorithm>
#include <chrono>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

namespace {

using kiln::bench::median;
using kiln::detail::CompileRequest;
using Clock = std::chrono::steady_clock;

// The CUB example's request for `arch`, as the JIT tier builds it.
CompileRequest cub_request(unsigned arch) {
  const kiln::Catalog& catalog = kiln::examples::catalog();
  for (std::uint32_t i = 0; i < catalog.units.size(); ++i)
    if (catalog.str(catalog.units[i].name) == "block_sum_f32") return kiln::detail::make_request(catalog, i, arch);
  std::fprintf(stderr, "bench_pch_first_use: no unit block_sum_f32 in the examples catalog\n");
  std::exit(1);
}

// `request` on a fresh worker: its outcome, or exit on any failure (a benchmark of a broken compile
// means nothing).
kiln::detail::CompileOutcome on_fresh_worker(const CompileRequest& request, double* cpu_ms = nullptr) {
  const double cpu_before = kiln::bench::children_cpu_seconds();
  static const std::filesystem::path executable = kiln::detail::find_jit_worker();
  if (executable.empty()) {
    std::fprintf(stderr, "bench_pch_first_use: no kiln-jitd found (set KILN_JITD)\n");
    std::exit(1);
  }
  auto worker = kiln::detail::spawn_worker(executable, true);
  if (!worker) {
    std::fprintf(stderr, "bench_pch_first_use: %s\n", worker.error().c_str());
    std::exit(1);
  }
  const auto deadline = Clock::now() + std::chrono::minutes(5);
  const auto in_time = [&] { return Clock::now() < deadline; };
  if (const auto hello = kiln::detail::read_hello(*worker, in_time); !hello || !worker->pch_files) {
    std::fprintf(stderr, "bench_pch_first_use: the worker %s\n",
                 hello ? "runs with ASLR on: NVRTC cannot read PCH files here" : hello.error().c_str());
    std::exit(1);
  }
  kiln::detail::Answer a = kiln::detail::exchange(*worker, request, in_time);
  worker->retire(std::chrono::milliseconds(300));
  if (cpu_ms != nullptr) *cpu_ms = 1000 * (kiln::bench::children_cpu_seconds() - cpu_before);
  const kiln::detail::PchResult wanted =
      request.pch == kiln::detail::PchMode::create ? kiln::detail::PchResult::created : kiln::detail::PchResult::used;
  if (!a.answered || a.exception || !a.outcome.entry || a.outcome.pch != wanted) {
    std::fprintf(stderr, "bench_pch_first_use: the compile did not %s the PCH: %s\n%s\n",
                 wanted == kiln::detail::PchResult::created ? "create" : "use",
                 !a.answered ? a.problem.c_str() : a.outcome.entry ? "" : a.outcome.entry.error().c_str(),
                 a.outcome.log.c_str());
    std::exit(1);
  }
  return a.outcome;
}

// This process's CPU time so far (every thread's), in milliseconds.
double self_cpu_ms() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return 1e3 * static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e3;
}

}  // namespace

int main(int argc, char** argv) {
  const int pairs = argc > 1 ? std::max(1, std::atoi(argv[1])) : 5;
  const unsigned arch = argc > 2 ? static_cast<unsigned>(std::atoi(argv[2])) : 90;
  const std::filesystem::path dir = kiln::bench::make_temp_dir("pch-first-use");
  CompileRequest request = cub_request(arch);
  const std::string family =
      kiln::detail::pch_family(request, kiln::examples::catalog().header_bundle_digest, kiln::detail::worker_glibc_tunables());
  const std::filesystem::path packed = kiln::detail::pch_path(dir, family);

  // The family's PCH, built by a fresh worker and packed as the cache keeps it; NVRTC's plain file beside it.
  request.pch = kiln::detail::PchMode::create;
  request.pch_path = packed.string();
  on_fresh_worker(request);
  const std::filesystem::path plain = dir / "plain.pch";
  {
    auto unpacked = kiln::detail::UnpackedPch::open(packed, kiln::detail::pch_threads(), kiln::detail::UnpackIn::this_process);
    if (!unpacked) {
      std::fprintf(stderr, "bench_pch_first_use: %s\n", unpacked.error().c_str());
      return 1;
    }
    std::filesystem::copy_file(unpacked->path(), plain);
  }
  request.pch = kiln::detail::PchMode::use;

  std::vector<double> plain_ms, host_unpack_ms, first_ms, further_ms, own_ms, own_unpack_ms;
  // CPU time: the worker's whole life (start, NVRTC, nvJitLink), and the host's unpacking.
  std::vector<double> plain_cpu, host_cpu, first_cpu, further_cpu, own_cpu;
  double cpu = 0;
  const auto with_plain_file = [&] {
    CompileRequest r = request;
    r.pch_unpacked = plain.string();  // the worker opens it as it would the host's copy: NVRTC reads the file
    plain_ms.push_back(on_fresh_worker(r, &cpu).nvrtc_ms);
    plain_cpu.push_back(cpu);
  };
  const auto with_host_copy = [&] {
    kiln::detail::HostPchCopies copies;  // a new process's: nothing unpacked yet
    const double self_before = self_cpu_ms();
    const auto copy = copies.get(family, packed);
    host_cpu.push_back(self_cpu_ms() - self_before);
    if (!copy || !copy->pch) {
      std::fprintf(stderr, "bench_pch_first_use: no host copy: %s\n", copy ? "this process is not dumpable" : copy.error().c_str());
      std::exit(1);
    }
    host_unpack_ms.push_back(copy->unpack_ms);
    CompileRequest r = request;
    r.pch_unpacked = copy->pch->shared_path();
    first_ms.push_back(on_fresh_worker(r, &cpu).nvrtc_ms);
    first_cpu.push_back(cpu);
    further_ms.push_back(on_fresh_worker(r, &cpu).nvrtc_ms);
    further_cpu.push_back(cpu);
  };
  for (int i = 0; i < pairs; ++i) {
    if (i % 2 == 0) {
      with_plain_file();
      with_host_copy();
    } else {
      with_host_copy();
      with_plain_file();
    }
    // Each worker unpacking the packed file itself (no host copy), as where the host is not dumpable.
    const auto outcome = on_fresh_worker(request, &cpu);
    own_cpu.push_back(cpu);
    own_ms.push_back(outcome.nvrtc_ms);
    own_unpack_ms.push_back(outcome.pch_unpack_ms);
  }

  const double base = median(plain_ms), host = median(host_unpack_ms);
  // Per pair, against that pair's compile with the plain file: the machine's load drifts between pairs.
  const auto against_plain = [&](const std::vector<double>& ms, double extra) {
    std::vector<double> d;
    for (std::size_t i = 0; i < ms.size(); ++i) d.push_back(ms[i] + (extra > 0 ? host_unpack_ms[i] : 0) - plain_ms[i]);
    return median(d);
  };
  const auto range = [](const std::vector<double>& ms) {
    return std::to_string(static_cast<long>(*std::min_element(ms.begin(), ms.end()))) + "-" +
           std::to_string(static_cast<long>(*std::max_element(ms.begin(), ms.end())));
  };
  std::printf("PCH first use per worker: %s for sm_%u, each compile on a fresh kiln-jitd, medians of %d alternating pairs\n"
              "(NVRTC's PCH %llu bytes, packed %llu bytes)\n\n",
              "examples/block_sum_f32", arch, pairs, static_cast<unsigned long long>(std::filesystem::file_size(plain)),
              static_cast<unsigned long long>(std::filesystem::file_size(packed)));
  std::printf("| how | NVRTC, its PCH opened or unpacked included (range) | host unpacks, once per process (range) | against NVRTC's plain file, per pair | worker's CPU | host's CPU |\n"
              "|---|---:|---:|---:|---:|---:|\n");
  std::printf("| NVRTC's plain file (in the page cache) | %.0f ms (%s) | | | %.0f ms | |\n", base, range(plain_ms).c_str(),
              median(plain_cpu));
  std::printf("| packed, host's copy: a process's first worker | %.0f ms (%s) | %.0f ms (%s) | %+.0f ms, %+.0f ms with the host's unpacking | %.0f ms | %.0f ms |\n",
              median(first_ms), range(first_ms).c_str(), host, range(host_unpack_ms).c_str(), against_plain(first_ms, 0),
              against_plain(first_ms, 1), median(first_cpu), median(host_cpu));
  std::printf("| packed, host's copy: further workers | %.0f ms (%s) | | %+.0f ms | %.0f ms | |\n", median(further_ms),
              range(further_ms).c_str(), against_plain(further_ms, 0), median(further_cpu));
  std::printf("| packed, each worker unpacks it (%.0f ms of it unpacking) | %.0f ms (%s) | | %+.0f ms | %.0f ms | |\n",
              median(own_unpack_ms), median(own_ms), range(own_ms).c_str(), against_plain(own_ms, 0), median(own_cpu));

  // The host's unpacking alone, by how its memory file is filled and on how many threads, alternating.
  struct Fill {
    const char* how;
    kiln::detail::UnpackFill fill;
    unsigned threads;
    std::vector<double> ms;
  };
  const unsigned threads = kiln::detail::pch_threads();
  std::vector<Fill> fills;
  for (const unsigned t : {threads, std::min(threads, 8u), std::min(threads, 4u)}) {
    if (!fills.empty() && fills.back().threads == t) continue;
    fills.push_back({"shared mapping, pages made per thread", kiln::detail::UnpackFill::mapped, t, {}});
    fills.push_back({"pwrite", kiln::detail::UnpackFill::pwrite, t, {}});
  }
  for (int i = 0; i < pairs; ++i) {
    for (std::size_t k = 0; k < fills.size(); ++k) {
      Fill& f = fills[(k + static_cast<std::size_t>(i)) % fills.size()];
      const auto start = std::chrono::steady_clock::now();
      const auto unpacked = kiln::detail::UnpackedPch::open(packed, f.threads, kiln::detail::UnpackIn::this_process, f.fill);
      f.ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
      if (!unpacked) {
        std::fprintf(stderr, "bench_pch_first_use: %s\n", unpacked.error().c_str());
        return 1;
      }
    }
  }
  // The floor of any unpacking into a new memory file: the kernel making its pages, nothing decompressed.
  std::vector<double> pages_ms;
  const std::uint64_t unpacked_bytes = std::filesystem::file_size(plain);
  for (int i = 0; i < pairs; ++i) {
    const auto start = std::chrono::steady_clock::now();
    const int fd = ::memfd_create("kiln-pch-pages", MFD_CLOEXEC);
    const bool made = fd >= 0 && ::fallocate(fd, 0, 0, static_cast<off_t>(unpacked_bytes)) == 0;
    pages_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    if (fd >= 0) ::close(fd);
    if (!made) {
      std::fprintf(stderr, "bench_pch_first_use: no memory file of %llu bytes\n", static_cast<unsigned long long>(unpacked_bytes));
      return 1;
    }
  }
  std::printf("\nThe host's unpacking alone (%u cores), medians of %d runs each, in turn\n\n"
              "| memory file filled by | threads | ms (range) |\n|---|---:|---:|\n",
              std::thread::hardware_concurrency(), pairs);
  for (const Fill& f : fills) std::printf("| %s | %u | %.1f (%s) |\n", f.how, f.threads, median(f.ms), range(f.ms).c_str());
  std::printf("| nothing: its pages alone (memfd_create, fallocate) | 1 | %.1f (%s) |\n", median(pages_ms), range(pages_ms).c_str());
  kiln::bench::remove_tree(dir.string());
  return 0;
}
