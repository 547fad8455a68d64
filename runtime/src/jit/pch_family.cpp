// PCH family keys: which compiles can share one NVRTC precompiled header (the pool and the worker agree on them).
#include "jit/pch_family.hpp"

namespace kiln::detail {

namespace {

std::string_view trimmed(std::string_view s) {
  constexpr std::string_view space = " \t\r\f\v";
  const std::size_t first = s.find_first_not_of(space);
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(space) - first + 1);
}

// Appends `s` so that no two field lists give the same key.
void field(std::string& key, std::string_view s) {
  key += std::to_string(s.size());
  key += ':';
  key += s;
}

}  // namespace

std::string leading_directives(std::string_view source) {
  std::string out, directive;
  bool in_comment = false, continued = false;
  while (!source.empty()) {
    const std::size_t eol = source.find('\n');
    const std::string_view line = source.substr(0, eol);
    source = eol == std::string_view::npos ? std::string_view{} : source.substr(eol + 1);
    std::string code;  // the line without its comments
    for (std::size_t i = 0; i < line.size();) {
      if (in_comment) {
        const std::size_t end = line.find("*/", i);
        if (end == std::string_view::npos) break;
        in_comment = false;
        i = end + 2;
        code += ' ';
      } else if (line.compare(i, 2, "//") == 0) {
        break;
      } else if (line.compare(i, 2, "/*") == 0) {
        in_comment = true;
        i += 2;
      } else {
        code += line[i++];
      }
    }
    std::string_view text = trimmed(code);
    if (!continued) {
      if (text.empty()) continue;
      if (text.front() != '#') break;
      directive.clear();
    }
    continued = !text.empty() && text.back() == '\\';
    if (continued) text.remove_suffix(1);
    if (!directive.empty() && !text.empty()) directive += ' ';
    directive += trimmed(text);
    if (!continued) {
      out += directive;
      out += '\n';
    }
  }
  return out;
}

std::string pch_family(const CompileRequest& request) {
  if (request.pch_dir.empty()) return {};
  std::string key;
  field(key, request.pch_dir);
  field(key, std::to_string(request.arch));
  key += "options ";
  for (const std::string& option : request.options) field(key, option);
  key += "includes ";
  for (const std::string& dir : request.include_dirs) field(key, dir);
  key += "source ";
  field(key, leading_directives(request.source));
  return key;
}

}  // namespace kiln::detail
