// Files kept with a sum beside them (<file>.sum: size and SHA-256): published sum first, verified before use.
//
// What the cache holds that a consumer reads by path rather than through kiln's entry codec — NVRTC's
// precompiled headers (jit/pch_store.hpp) — is kept this way, so that a damaged or altered file is
// caught and deleted before anything hands it on.
#pragma once

#include "base/result.hpp"

#include <filesystem>

namespace kiln::detail {

// <file>.sum.
std::filesystem::path sum_path(const std::filesystem::path& file);

// A unique temp name next to `final_path`: <final_path>.tmp.<pid>.<random> (disk/files.hpp classifies it).
std::filesystem::path summed_temp_path(const std::filesystem::path& final_path);

// `temp` renamed to `final_path` after its sum: the sum first, so that a reader that finds the new file
// finds its sum, and one that finds the old file with the new sum deletes both. Made 0600. On failure
// both temp files are removed and the reason given.
Status publish_summed(const std::filesystem::path& temp, const std::filesystem::path& final_path);

// Whether the file at `path` is what its sum says (size and SHA-256). A file that is not is deleted,
// with its sum. A missing file fails with an empty reason.
Status verify_summed(const std::filesystem::path& path);

}  // namespace kiln::detail
