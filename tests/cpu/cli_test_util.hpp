// Runs the real `kiln` command (KILN_TEST_CLI) over a cache directory of the test's, as a user would, and
// reads what a process said.
#pragma once

#include "cache_test_util.hpp"
#include "run_process.hpp"

#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#ifdef KILN_TEST_CLI

namespace kiln::test {

using Env = std::map<std::string, std::optional<std::string>>;

inline ProcessResult kiln_cli(std::vector<std::string> args, const std::filesystem::path& cache, Env env = {},
                              const std::function<bool()>& in_child = {}) {
  args.insert(args.begin(), KILN_TEST_CLI);
  env.emplace("KILN_CACHE_DIR", cache.string());
  env.emplace("KILN_CACHE", std::nullopt);
  env.emplace("KILN_CACHE_MAX_BYTES", std::nullopt);
  env.emplace("KILN_REMOTE_CACHE", std::nullopt);
  return run_process(args, env, std::chrono::seconds(180), in_child);
}

inline std::size_t entries(const std::filesystem::path& cache) { return files_in(entries_dir(cache), ".kiln").size(); }

}  // namespace kiln::test

#endif

namespace kiln::test {

// Whether a process's output has `text`.
inline bool says(const ProcessResult& r, std::string_view text) { return r.output.find(text) != std::string::npos; }

// One field of a demand record as the runtime writes it (KILN_RECORD): "KIND N\nVALUE\n", N the value's bytes.
inline std::string record_field(std::string_view kind, std::string_view value) {
  return std::string(kind) + " " + std::to_string(value.size()) + "\n" + std::string(value) + "\n";
}

}  // namespace kiln::test
