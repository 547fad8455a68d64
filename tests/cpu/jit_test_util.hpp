// What the JIT-compiler tests share: a CompileRequest per example unit, and NVRTC called directly.
#pragma once

#include <kiln/catalog.hpp>

#include "examples_catalog.hpp"
#include "jit/compiler/compile.hpp"  // runtime/src
#include "jit/jit_pool.hpp"
#include "jit/request.hpp"
#include "jit/compiler/nvrtc_library.hpp"

#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::test {

inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline std::vector<std::string> split_lines(std::string_view text) {
  std::vector<std::string> lines;
  while (!text.empty()) {
    const std::size_t eol = text.find('\n');
    lines.emplace_back(text.substr(0, eol));
    text = eol == std::string_view::npos ? std::string_view{} : text.substr(eol + 1);
  }
  return lines;
}

// The request the JIT tier builds for a unit of the examples catalog: its translation unit and, in
// memory, the headers it includes, as the catalog carries them.
inline detail::CompileRequest example_request(const UnitEntry& unit, unsigned arch) {
  const Catalog& catalog = examples::catalog();
  return detail::make_request(catalog, static_cast<std::uint32_t>(&unit - catalog.units.data()), arch);
}

inline const UnitEntry& example_unit(std::string_view name) {
  const Catalog& catalog = examples::catalog();
  for (const UnitEntry& u : catalog.units) {
    if (catalog.str(u.name) == name) return u;
  }
  throw std::runtime_error("no unit " + std::string(name) + " in the examples catalog");
}

// What NVRTC alone makes of a request with `arch_option` (-arch=compute_XX: PTX; -arch=sm_XX: its own
// cubin), to compare kiln's output with.
struct DirectNvrtc {
  std::string log;
  std::string ptx;
  std::string cubin;
};

inline DirectNvrtc nvrtc_direct(const detail::CompileRequest& request, const std::string& arch_option) {
  const detail::Nvrtc& api = detail::nvrtc();
  nvrtcProgram program = nullptr;
  std::vector<const char*> names, contents;
  for (const detail::Header& h : request.headers) {
    names.push_back(h.name.c_str());
    contents.push_back(h.content.c_str());
  }
  if (api.nvrtcCreateProgram(&program, request.source.c_str(), request.source_name.c_str(),
                             static_cast<int>(names.size()), contents.data(), names.data()) != NVRTC_SUCCESS) {
    throw std::runtime_error("nvrtcCreateProgram failed");
  }
  std::vector<std::string> options = request.options;
  options.push_back("-default-device");
  options.push_back(arch_option);
  std::vector<const char*> argv;
  for (const std::string& o : options) argv.push_back(o.c_str());
  for (const std::string& e : request.expressions) api.nvrtcAddNameExpression(program, e.c_str());
  const nvrtcResult compiled = api.nvrtcCompileProgram(program, static_cast<int>(argv.size()), argv.data());
  DirectNvrtc out;
  std::size_t size = 0;
  api.nvrtcGetProgramLogSize(program, &size);
  out.log.resize(size);
  api.nvrtcGetProgramLog(program, out.log.data());
  if (compiled == NVRTC_SUCCESS) {
    if (api.nvrtcGetPTXSize(program, &size) == NVRTC_SUCCESS) {
      out.ptx.resize(size);
      api.nvrtcGetPTX(program, out.ptx.data());
      out.ptx.resize(size ? size - 1 : 0);  // drop the terminating NUL
    }
    if (arch_option.find("sm_") != std::string::npos && api.nvrtcGetCUBINSize(program, &size) == NVRTC_SUCCESS) {
      out.cubin.resize(size);
      api.nvrtcGetCUBIN(program, out.cubin.data());
    }
  }
  api.nvrtcDestroyProgram(&program);
  if (compiled != NVRTC_SUCCESS) throw std::runtime_error("NVRTC failed: " + out.log);
  return out;
}

}  // namespace kiln::test
