// The pool's settings from the environment, and where the kiln-jitd executable is found.
#include "jit/pool/settings.hpp"

#include "base/parse.hpp"
#include "base/settings.hpp"
#include "jit/pool/pool.hpp"  // kDefaultJitTimeout

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string_view>
#include <thread>

namespace kiln::detail {

namespace {

constexpr unsigned kDefaultWorkersCap = 16;  // docs/DESIGN.md: 16 processes gave 8.6x on 16 cores


const char anchor = 0;  // an address inside libkiln, for dladdr

std::filesystem::path libkiln_dir() {
  Dl_info info{};
  std::filesystem::path file;
  if (::dladdr(&anchor, &info) != 0 && info.dli_fname != nullptr && info.dli_fname[0] != '\0') file = info.dli_fname;
  else file = "/proc/self/exe";  // libkiln linked statically: its code is the executable's
  std::error_code ec;
  const auto resolved = std::filesystem::canonical(file, ec);
  return (ec ? std::filesystem::absolute(file, ec) : resolved).parent_path();
}

}  // namespace

unsigned default_jit_workers() { return std::clamp(std::thread::hardware_concurrency(), 1u, kDefaultWorkersCap); }

Result<unsigned> jit_workers_from(const char* value) {
  if (value == nullptr || *value == '\0') return default_jit_workers();
  if (const auto n = parse_count(value, 1, kMaxJitWorkers)) return static_cast<unsigned>(*n);
  else return fail("KILN_JIT_WORKERS=" + n.error() + "; using " + std::to_string(default_jit_workers()) + " JIT workers");
}

Result<std::chrono::milliseconds> jit_timeout_from(const char* value) {
  const std::chrono::milliseconds fallback(kDefaultJitTimeout);
  if (value == nullptr || *value == '\0') return fallback;
  const std::string_view text(value);
  if (const auto seconds = parse_count(text, 1, 86400))
    return std::chrono::milliseconds(std::chrono::seconds(*seconds));
  return fail("KILN_JIT_TIMEOUT='" + std::string(text) + "' is not a whole number of seconds from 1 to 86400; using " +
              std::to_string(kDefaultJitTimeout.count()) + " s");
}

namespace {
// An on/off variable, unset or empty meaning on; a value that does not parse says what stays.
Result<bool> switch_from(const char* value, std::string_view variable, std::string_view kept) {
  const std::string_view text = value == nullptr ? "" : value;
  if (text.empty()) return true;
  if (const auto on = parse_switch(text)) return *on;
  else return fail(std::string(variable) + "=" + on.error() + "; " + std::string(kept));
}
}  // namespace

Result<bool> jit_pch_from(const char* value) {
  return switch_from(value, "KILN_JIT_PCH", "precompiled headers stay on");
}

Result<SplitMode> jit_split_from(const char* value) {
  const std::string_view text = value == nullptr ? "" : value;
  if (text.empty() || text == "auto") return SplitMode::cost_model;
  if (const auto on = parse_switch(text)) return *on ? SplitMode::always : SplitMode::off;
  else return fail("KILN_JIT_SPLIT=" + on.error() + " or auto; units are split where the cost model says it pays");
}

Result<std::uint64_t> jit_memory_from(const char* value) {
  if (value == nullptr || *value == '\0') return kDefaultWorkerMemory;
  if (const auto bytes = parse_size(value)) return *bytes;
  else return fail("KILN_JIT_MEMORY=" + bytes.error() + "; JIT workers may allocate " + describe_memory_limit(kDefaultWorkerMemory));
}

std::string describe_memory_limit(std::uint64_t bytes) {
  if (bytes == 0) return "no limit";
  if (bytes % (std::uint64_t{1} << 30) == 0) return std::to_string(bytes >> 30) + " GiB";
  if (bytes % (std::uint64_t{1} << 20) == 0) return std::to_string(bytes >> 20) + " MiB";
  return std::to_string(bytes) + " bytes";
}

bool is_executable_file(const std::filesystem::path& p) {
  std::error_code ec;
  return std::filesystem::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0;
}

std::vector<std::filesystem::path> jit_worker_candidates() {
  if (std::string named = setting("KILN_JITD"); !named.empty()) return {std::move(named)};
  std::vector<std::filesystem::path> places{libkiln_dir() / "kiln-jitd"};
#ifdef KILN_JITD_FROM_LIBDIR
  places.push_back((libkiln_dir() / KILN_JITD_FROM_LIBDIR).lexically_normal());  // an install tree, wherever it lies
#endif
#ifdef KILN_JITD_INSTALL_PATH
  places.emplace_back(KILN_JITD_INSTALL_PATH);
#endif
  return places;
}

std::filesystem::path find_jit_worker() {
  for (const auto& p : jit_worker_candidates())
    if (is_executable_file(p)) return p;
  return {};
}

std::string worker_glibc_tunables(const char* host_value) {
  const std::string host = host_value != nullptr ? host_value : "";
  // name=value items, separated by ':'.
  for (std::size_t at = 0; at <= host.size();) {
    const std::size_t end = std::min(host.find(':', at), host.size());
    const std::string_view item = std::string_view(host).substr(at, end - at);
    if (item.starts_with(kHugePagesTunable) && item.substr(kHugePagesTunable.size()).starts_with('=')) return host;
    at = end + 1;
  }
  const std::string huge_pages = std::string(kHugePagesTunable) + "=1";
  return host.empty() ? huge_pages : host + ":" + huge_pages;
}

std::string worker_glibc_tunables() { return worker_glibc_tunables(setting("GLIBC_TUNABLES").c_str()); }

std::vector<std::string> worker_environment(const char* const* host) {
  constexpr std::string_view name = "GLIBC_TUNABLES=";
  std::vector<std::string> env;
  const char* tunables = nullptr;
  for (; host != nullptr && *host != nullptr; ++host) {
    if (std::string_view(*host).starts_with(name)) tunables = *host + name.size();
    else env.emplace_back(*host);
  }
  env.push_back(std::string(name) + worker_glibc_tunables(tunables));
  return env;
}

}  // namespace kiln::detail
