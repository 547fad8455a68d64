// Precompiled headers kept across processes: where a family's PCH file lives, and how it is published
// and verified (docs/DESIGN.md, "PCH across processes").
//
// NVRTC reads a PCH file only in a process whose heap sits where the writer's did: with ASLR off
// (personality ADDR_NO_RANDOMIZE), which kiln-jitd turns on for itself (runtime/tools/kiln_jitd.cpp).
// Elsewhere NVRTC rejects the file and compiles without it: slow, never wrong. Files live in the cache's
// entry directory, counted by its size cap: <key>.pch (NVRTC's bytes packed in zstd frames,
// jit/pch_pack.hpp, written by the worker that built it, temp file then rename) and <key>.pch.sum (the
// packed file's size and SHA-256, renamed into place first). A file whose sum does not match is deleted,
// never unpacked.
#pragma once

#include "base/result.hpp"
#include "jit/compiler/compile.hpp"

#include <filesystem>
#include <string>
#include <string_view>

namespace kiln::detail {

// The preprocessor directives a source starts with, up to its first #line (NVRTC builds no PCH past a
// #line): comments and blank lines dropped, one directive per line. It stops at the first line of
// anything else.
std::string leading_directives(std::string_view source);

// The PCH family of a request: sources whose include prefix and options are the same share one PCH.
// Empty when the source's prefix includes nothing (a PCH would hold nothing) or it is assembled from PTX.
// Its key covers the toolkit, the options, the architecture, the include prefix, the headers' bytes
// and the workers' malloc tunables (GLIBC_TUNABLES, jit/pool/settings.hpp): NVRTC refuses a PCH written
// by a process whose heap was laid out otherwise.
std::string pch_family(const CompileRequest& request, std::string_view headers_digest, std::string_view worker_tunables);

// <entries>/<family>.pch: where a family's PCH lives in a cache whose entry directory is `entries`.
std::filesystem::path pch_path(const std::filesystem::path& entries, std::string_view family);

// Worker side, after NVRTC failed to create the PCH file `path`: one line saying why, with the file, when
// NVRTC's log says it could not write it ("error while writing PCH file: No space left on device", on a
// line after the one naming the file, which is all the pool's warning showed); empty otherwise.
std::string pch_write_failure(std::string_view log, std::string_view path);

// Worker side, after NVRTC created `raw`: packed into a temp file (jit/pch_pack.hpp), `raw` removed, then
// the sum and the packed file renamed into place at `final_path`. On failure every temp file is removed
// and the reason given.
Status publish_pch(const std::filesystem::path& raw, const std::filesystem::path& final_path);
// A unique temp name next to `final_path`, for NVRTC's --create-pch.
std::filesystem::path pch_temp_path(const std::filesystem::path& final_path);

// Host side: whether the file at `path` is what its sum says (size and SHA-256). A file that is not is
// deleted, with its sum. A missing file fails with an empty reason.
Status verify_pch(const std::filesystem::path& path);

// Marks the PCH file at `path` most recently used (its mtime, as a cache hit does an entry's).
void touch_pch(const std::filesystem::path& path);

}  // namespace kiln::detail
