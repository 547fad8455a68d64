// A unit's source: what compiles it and what its key parts are taken from, one struct whether the unit is
// a catalog's row or a program given at run time (docs/DESIGN.md, "Programs given at run time"). A compile
// request is made of a unit source and a target (jit/request.hpp's make_request).
#pragma once

#include <kiln/cache.hpp>  // CachedKernel

#include <string>
#include <vector>

namespace kiln::detail {

// A header handed to NVRTC in memory: `#include <name>` finds it (docs/DESIGN.md, "Headers in memory").
struct Header {
  std::string name;
  std::string content;
};

struct UnitSource {
  std::string registry;
  std::string unit;
  std::string source_name;               // e.g. "examples.block_sum_f32.cu", for NVRTC's messages
  std::string source;                    // the translation unit: a table's as nvcc compiled it, a program's as given
  std::vector<std::string> options;      // as NVRTC gets them, one each (no -arch)
  std::vector<Header> headers;           // what the source includes, directly or not, in memory
  // Each kernel's registry name and lowered name: a table's from its catalog; a program's lowered names
  // are empty until NVRTC gives them (CompileOutcome::lowered), and any an entry records then serves.
  std::vector<CachedKernel> kernels;
  std::vector<std::string> expressions;  // the C++ name expression of each kernel, same order
  // SHA-256 (hex) of the headers: what a PCH of its includes is keyed by with the options (a table's
  // header bundle's, a program's headers'; empty where it has none).
  std::string headers_digest;
};

}  // namespace kiln::detail
