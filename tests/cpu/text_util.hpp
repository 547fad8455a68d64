// Small helpers the CPU tests share: one definition each, so that the test files may be compiled together
// (a unity build: scripts/sanitize.sh's).
#pragma once

#include <cstddef>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

namespace kiln::test {

inline constexpr std::size_t kMiB = std::size_t{1} << 20;

inline bool contains(const std::string& text, std::string_view part) { return text.find(part) != std::string::npos; }

// Writes `text` to `path`, making its directory.
inline void write_file(const std::filesystem::path& path, const std::string& text) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

}  // namespace kiln::test
