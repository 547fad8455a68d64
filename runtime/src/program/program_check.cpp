// A program's options, sizes and includes checked before it is keyed: what it may ask of kiln.
#include "program/program_check.hpp"

#include <kiln/error.hpp>

#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <optional>
#include <regex>
#include <utility>

namespace kiln::detail {
namespace {

// The spec table's allowlist (codegen/spec.py, _ALLOWED_OPTIONS: both compilers take them alike), with
// what only a program needs: -I (its directories are keyed by their files), the C++ standards NVRTC
// takes, and NVRTC-only switches that change code, not files. Anything else, an option that writes
// (--create-pch, -time, --fdevice-time-trace) or reads a file outside the key (--use-pch, -include,
// --pre-include) among them, is refused by name.
struct Allowed {
  std::regex pattern;
  std::string_view what;
};
const std::vector<Allowed>& allowed() {
  static const std::vector<Allowed> list = [] {
    const std::array<std::pair<const char*, std::string_view>, 15> rows{{
        {R"(-D[A-Za-z_][A-Za-z0-9_]*(=.*)?)", "-DNAME or -DNAME=VALUE"},
        {R"(-U[A-Za-z_][A-Za-z0-9_]*)", "-UNAME"},
        {R"(--?std=c\+\+(11|14|17|20))", "-std=c++11/14/17/20 (or --std=)"},
        {R"(-lineinfo|--generate-line-info)", "-lineinfo"},
        {R"(--?use_fast_math)", "--use_fast_math"},
        {R"(--?maxrregcount=[0-9]+)", "--maxrregcount=N"},
        {R"(--?(ftz|prec-div|prec-sqrt|fmad)=(true|false))", "--ftz/--prec-div/--prec-sqrt/--fmad=true|false (or one dash)"},
        {R"(--extra-device-vectorization)", "--extra-device-vectorization"},
        {R"(--expt-relaxed-constexpr|--expt-extended-lambda|--extended-lambda)",
         "--expt-relaxed-constexpr, --extended-lambda"},
        {R"(--diag-(suppress|warn|error)=[0-9]+(,[0-9]+)*)", "--diag-suppress/--diag-warn/--diag-error=N[,N...]"},
        {R"(-default-device|--device-as-default-execution-space)", "-default-device"},
        {R"(-w|--disable-warnings|-Wno-deprecated-declarations)", "-w"},
        {R"(-G|--device-debug)", "-G"},
        {R"(--device-int128)", "--device-int128"},
        {R"(-I.+|--include-path=.+)", "-I DIR, -IDIR or --include-path=DIR"},
    }};
    std::vector<Allowed> l;
    for (const auto& [pattern, what] : rows) l.push_back({std::regex(pattern), what});
    return l;
  }();
  return list;
}

bool allowed_option(const std::string& o) {
  return std::any_of(allowed().begin(), allowed().end(),
                     [&](const Allowed& a) { return std::regex_match(o, a.pattern); });
}

[[noreturn]] void refuse(std::string_view label, const std::string& what) {
  throw Error(Errc::invalid_argument, "kiln: program '" + std::string(label) + "': " + what);
}

std::string mib(std::size_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

// Why `name` (a path as an include or a header name writes it) cannot be keyed, or empty.
std::string unkeyable(std::string_view name) {
  if (name.starts_with('/')) return "an absolute path";
  if (has_parent_part(name)) return "a path with a '..' part";
  return {};
}

std::string spelled(const IncludeRef& r) {
  return (r.probe ? "__has_include(" : "#include ") + std::string(r.quoted ? "\"" : "<") + r.name +
         (r.quoted ? "\"" : ">") + (r.probe ? ")" : "");
}

bool identifier_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// C++11's and C++14's trigraphs as phase 1 replaces them: "??/" then a line break is a splice, "??=" a
// '#' (C++17 dropped them: NVRTC then leaves them, and so must the scan, or "// ??/" would hide the
// next line's #include from it).
std::string translate_trigraphs(std::string_view text) {
  static constexpr std::string_view from = "=/'()!<>-", to = "#\\^[]|{}~";
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    const std::size_t k = i + 2 < text.size() && text[i] == '?' && text[i + 1] == '?' ? from.find(text[i + 2]) : from.npos;
    if (k == from.npos) {
      out += text[i];
    } else {
      out += to[k];
      i += 2;
    }
  }
  return out;
}

// Where the raw string literal whose opening quote is text[at] ends (one past its closing quote), when
// `prefix` (the identifier just before the quote) makes it one: R, u8R, uR, UR or LR, then a delimiter of
// at most 16 characters and '('. npos when it is not a raw string; text.size() when it never ends.
std::size_t raw_string_end(std::string_view text, std::size_t at, std::string_view prefix) {
  if (prefix != "R" && prefix != "u8R" && prefix != "uR" && prefix != "UR" && prefix != "LR") return std::string_view::npos;
  std::size_t open = at + 1;
  while (open < text.size() && open - at <= 17 && text[open] != '(') {
    if (std::string_view(" )\\\t\v\f\n\"").find(text[open]) != std::string_view::npos) return std::string_view::npos;
    ++open;
  }
  if (open >= text.size() || text[open] != '(') return std::string_view::npos;
  const std::string close = ")" + std::string(text.substr(at + 1, open - at - 1)) + "\"";
  const std::size_t end = text.find(close, open + 1);
  return end == std::string_view::npos ? text.size() : end + close.size();
}

// The text as the preprocessor's lines: splices joined, comments replaced by a space (string, character
// and raw string literals kept out of it), each logical line with the physical line it begins on.
std::vector<std::pair<std::size_t, std::string>> logical_lines(std::string_view original, bool trigraphs) {
  const std::string translated = trigraphs ? translate_trigraphs(original) : std::string();
  const std::string_view text = trigraphs ? std::string_view(translated) : original;
  std::vector<std::pair<std::size_t, std::string>> lines;
  std::string current;
  std::size_t line = 1, begins = 1;
  bool in_block = false;
  char quote = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\\' && i + 1 < text.size() && (text[i + 1] == '\n' || (text[i + 1] == '\r' && i + 2 < text.size() && text[i + 2] == '\n'))) {
      i += text[i + 1] == '\r' ? 2 : 1;
      ++line;
      continue;
    }
    if (c == '\n') {
      ++line;
      quote = 0;
      if (in_block) continue;
      lines.emplace_back(begins, std::move(current));
      current.clear();
      begins = line;
      continue;
    }
    if (in_block) {
      if (c == '*' && i + 1 < text.size() && text[i + 1] == '/') in_block = false, ++i, current += ' ';
      continue;
    }
    if (quote != 0) {
      current += c;
      if (c == '\\' && i + 1 < text.size() && text[i + 1] != '\n') current += text[++i];
      else if (c == quote) quote = 0;
      continue;
    }
    if (c == '/' && i + 1 < text.size() && text[i + 1] == '*') {
      in_block = true;
      ++i;
      continue;
    }
    if (c == '/' && i + 1 < text.size() && text[i + 1] == '/') {
      // To the end of the line (a splice continues it, as it does a comment).
      while (i + 1 < text.size() && text[i + 1] != '\n') {
        if (text[i + 1] == '\\' && i + 2 < text.size() && text[i + 2] == '\n') ++line, ++i;
        ++i;
      }
      continue;
    }
    if (c == '"') {
      // A raw string: no escapes, no splices, any line breaks, up to its own delimiter.
      std::size_t k = current.size();
      while (k > 0 && identifier_char(current[k - 1])) --k;
      if (const std::size_t end = raw_string_end(text, i, std::string_view(current).substr(k)); end != std::string_view::npos) {
        for (std::size_t j = i; j < end; ++j) line += text[j] == '\n';
        current += "\"\"";
        i = end - 1;
        continue;
      }
    }
    if (c == '"' || c == '\'') quote = c;
    current += c;
  }
  lines.emplace_back(begins, std::move(current));
  return lines;
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\f' || c == '\v' || c == '\r'; }

std::size_t skip_space(std::string_view s, std::size_t at) {
  while (at < s.size() && is_space(s[at])) ++at;
  return at;
}

// The operand at `at`: "name" or <name>; nullopt for anything else (a macro).
std::optional<IncludeRef> operand(std::string_view s, std::size_t at, std::size_t line) {
  at = skip_space(s, at);
  if (at >= s.size() || (s[at] != '"' && s[at] != '<')) return std::nullopt;
  const char close = s[at] == '"' ? '"' : '>';
  const std::size_t end = s.find(close, at + 1);
  if (end == std::string_view::npos) return std::nullopt;
  return IncludeRef{std::string(s.substr(at + 1, end - at - 1)), close == '"', line};
}

}  // namespace

bool has_parent_part(std::string_view name) {
  for (std::size_t at = 0; at <= name.size();) {
    const std::size_t end = std::min(name.find('/', at), name.size());
    if (name.substr(at, end - at) == "..") return true;
    at = end + 1;
  }
  return false;
}

std::string_view allowed_program_options() {
  static const std::string text = [] {
    std::string t;
    for (const Allowed& a : allowed()) t += (t.empty() ? "" : "; ") + std::string(a.what);
    return t;
  }();
  return text;
}

std::string include_option(const std::vector<std::string>& options, std::size_t i, std::size_t& next) {
  next = i + 1;
  const std::string& o = options[i];
  if ((o == "-I" || o == "--include-path") && i + 1 < options.size()) {
    next = i + 2;
    return options[i + 1];
  }
  if (o.starts_with("--include-path=")) return o.substr(15);
  if (o.starts_with("-I")) return o.substr(2);
  return {};
}

bool trigraphs_on(const std::vector<std::string>& options) {
  bool on = false;  // NVRTC 13.0's default is C++17
  for (const std::string& o : options)
    if (o.starts_with("-std=") || o.starts_with("--std=")) on = o.ends_with("=c++11") || o.ends_with("=c++14");
  return on;
}

namespace {

// `#define NAME(params...)` at `at` (after "define"): NAME and its parameters; nullopt for an object-like
// macro.
std::optional<std::pair<std::string_view, std::vector<std::string_view>>> function_macro(std::string_view s, std::size_t at) {
  at = skip_space(s, at);
  std::size_t end = at;
  while (end < s.size() && identifier_char(s[end])) ++end;
  if (end == at || end >= s.size() || s[end] != '(') return std::nullopt;
  std::vector<std::string_view> params;
  for (std::size_t p = end + 1; p < s.size() && s[p] != ')';) {
    p = skip_space(s, p);
    std::size_t q = p;
    while (q < s.size() && identifier_char(s[q])) ++q;
    if (q > p) params.push_back(s.substr(p, q - p));
    p = skip_space(s, q);
    if (p < s.size() && s[p] == ',') ++p;
    else if (q == p) break;
  }
  return std::make_pair(s.substr(at, end - at), std::move(params));
}

// The identifier at `at` (after spaces), followed by ')': a macro's parameter handed on whole.
std::string_view handed_on(std::string_view s, std::size_t at) {
  at = skip_space(s, at);
  std::size_t end = at;
  while (end < s.size() && identifier_char(s[end])) ++end;
  const std::size_t close = skip_space(s, end);
  return end > at && close < s.size() && s[close] == ')' ? s.substr(at, end - at) : std::string_view{};
}

}  // namespace

Result<std::vector<IncludeRef>> scan_includes(std::string_view text, bool trigraphs, std::vector<std::string>* probes) {
  std::vector<IncludeRef> found;
  std::vector<std::string> own;  // the probe macros of `text` alone, where no `probes` is given
  std::vector<std::string>& known = probes != nullptr ? *probes : own;
  for (const auto& [line, l] : logical_lines(text, trigraphs)) {
    const std::string_view s = l;
    std::size_t at = skip_space(s, 0);
    const bool directive = s.substr(at).starts_with('#') || s.substr(at).starts_with("%:");
    std::optional<std::pair<std::string_view, std::vector<std::string_view>>> defined;  // a function-like #define
    if (directive) {
      at = skip_space(s, at + (s[at] == '#' ? 1 : 2));
      std::size_t end = at;
      while (end < s.size() && identifier_char(s[end])) ++end;
      const std::string_view word = s.substr(at, end - at);
      // #embed and __has_embed: not in NVRTC 13.0 ("unrecognized preprocessing directive"), but C23's
      // and C++26's, and they read a file as #include does.
      if (word == "include" || word == "include_next" || word == "import" || word == "embed") {
        std::optional<IncludeRef> ref = operand(s, end, line);
        if (!ref) return fail("line " + std::to_string(line) + ": #" + std::string(word) + " of a macro or other computed name");
        if (ref->name.starts_with('/')) return fail("line " + std::to_string(line) + ": " + spelled(*ref) + " is an absolute path");
        found.push_back(std::move(*ref));
        continue;
      }
      if (word == "define") defined = function_macro(s, end);
    }
    // __has_include anywhere (an #if, or a macro that expands to one), and the probe macros known so far:
    // each asks the file system too.
    const auto probe_at = [&](std::size_t p, std::size_t q) -> Result<bool> {
      q = skip_space(s, q);
      if (q >= s.size() || s[q] != '(') return false;
      std::optional<IncludeRef> ref = operand(s, q + 1, line);
      if (!ref) {
        // `#define NAME(x) __has_include(x)`: NAME becomes a probe, checked where it is used.
        const std::string_view param = handed_on(s, q + 1);
        if (defined && !param.empty() && p > at &&
            std::find(defined->second.begin(), defined->second.end(), param) != defined->second.end()) {
          if (std::find(known.begin(), known.end(), defined->first) == known.end()) known.emplace_back(defined->first);
          return true;
        }
        return fail("line " + std::to_string(line) + ": __has_include of a macro or other computed name");
      }
      ref->probe = true;
      if (ref->name.starts_with('/')) return fail("line " + std::to_string(line) + ": " + spelled(*ref) + " is an absolute path");
      found.push_back(std::move(*ref));
      return true;
    };
    for (std::size_t p = s.find("__has_"); p != std::string_view::npos; p = s.find("__has_", p + 1)) {
      std::size_t q = p + 6;
      while (q < s.size() && identifier_char(s[q])) ++q;
      const std::string_view probe = s.substr(p, q - p);
      if (probe != "__has_include" && probe != "__has_include_next" && probe != "__has_embed") continue;
      if (Result<bool> r = probe_at(p, q); !r) return fail(r.error());
    }
    for (std::size_t k = 0; k < known.size(); ++k) {
      const std::string name = known[k];  // probe_at may add to `known`
      for (std::size_t p = s.find(name); p != std::string_view::npos; p = s.find(name, p + 1)) {
        const std::size_t q = p + name.size();
        if ((p > 0 && identifier_char(s[p - 1])) || (q < s.size() && identifier_char(s[q]))) continue;
        if (defined && defined->first.data() == s.data() + p) continue;  // its own #define
        if (Result<bool> r = probe_at(p, q); !r) return fail(r.error());
      }
    }
  }
  return found;
}

void check_program(const ProgramSource& source, std::string_view label) {
  for (std::size_t i = 0; i < source.options.size(); ++i) {
    const std::string& o = source.options[i];
    if (o.find('\n') != std::string::npos) refuse(label, "an option holds a line break");
    std::size_t next = i + 1;
    if (o == "-I" || o == "--include-path") {
      if (i + 1 >= source.options.size()) refuse(label, "option '" + o + "' names no directory");
      include_option(source.options, i, next);
      if (source.options[i + 1].find('\n') != std::string::npos) refuse(label, "an option holds a line break");
      i = next - 1;
      continue;
    }
    if (!allowed_option(o))
      refuse(label, "option '" + o + "' is not one a program may give (allowed: " +
                        std::string(allowed_program_options()) + "; kiln adds -arch)");
  }
  std::size_t bytes = source.source.size();
  if (source.headers.size() > kMaxProgramHeaders)
    refuse(label, std::to_string(source.headers.size()) + " headers in memory, more than the " +
                      std::to_string(kMaxProgramHeaders) + " a program may give");
  for (const ProgramHeader& h : source.headers) bytes += h.name.size() + h.source.size();
  if (bytes > kMaxProgramBytes)
    refuse(label, "its source and headers in memory hold " + std::to_string(bytes) + " bytes, more than the " +
                      mib(kMaxProgramBytes) + " a program may give");
  if (source.name_expressions.size() > kMaxNameExpressions)
    refuse(label, std::to_string(source.name_expressions.size()) + " name expressions, more than the " +
                      std::to_string(kMaxNameExpressions) + " a program may give");
  for (const std::string& e : source.name_expressions)
    if (e.size() > kMaxNameExpressionBytes)
      refuse(label, "a name expression of " + std::to_string(e.size()) + " bytes ('" + e.substr(0, 40) +
                        "...'), more than the " + std::to_string(kMaxNameExpressionBytes >> 10) + " KiB a program may give");
}

void check_program_includes(const ProgramSource& source, std::string_view label) {
  const auto in_memory = [&](std::string_view name) {
    return std::any_of(source.headers.begin(), source.headers.end(), [&](const ProgramHeader& h) { return h.name == name; });
  };
  // The probe macros the source and its headers define, checked where any of them uses one.
  std::vector<std::string> probes;
  for (const ProgramHeader& h : source.headers) (void)scan_includes(h.source, trigraphs_on(source.options), &probes);
  (void)scan_includes(source.source, trigraphs_on(source.options), &probes);
  const auto check = [&](std::string_view text, const std::string& file, std::string_view dir) {
    const Result<std::vector<IncludeRef>> refs = scan_includes(text, trigraphs_on(source.options), &probes);
    if (!refs)
      refuse(label, file + ", " + refs.error() + ": kiln cannot key what it reads (give the header in memory, or "
                                                 "under an -I directory, by a relative name)");
    for (const IncludeRef& r : *refs) {
      if (has_parent_part(r.name))
        refuse(label, file + ", line " + std::to_string(r.line) + ": " + spelled(r) +
                          " is a path with a '..' part: kiln cannot key what it reads (give the header in memory, or "
                          "under an -I directory, by a relative name)");
      if (!r.quoted) continue;
      // NVRTC looks beside the including file first: for the source and the in-memory headers that is
      // the working directory (an in-memory header of the exact name wins there only for the source).
      const std::string beside = dir.empty() ? r.name : dir == "/" ? "/" + r.name : std::string(dir) + "/" + r.name;
      if (dir.empty() && in_memory(r.name)) continue;
      struct stat st {};
      if (::stat(beside.c_str(), &st) != 0) continue;
      refuse(label, file + ", line " + std::to_string(r.line) + ": " + spelled(r) + " would be read from " +
                        (dir.empty() ? "the working directory" : "beside it") + " (" + beside +
                        (S_ISREG(st.st_mode) ? "" : ", not a regular file") +
                        "), which is not in the program's key: give it as a header in memory or under an -I directory");
    }
  };
  for (const ProgramHeader& h : source.headers) {
    if (const std::string why = unkeyable(h.name); !why.empty())
      refuse(label, "header '" + h.name + "' in memory is named by " + why + ": name it as its #include does, relatively");
    if (h.name.empty()) refuse(label, "a header in memory has no name");
  }
  // NVRTC names the source after the label (".cu" added), so its directory is the label's.
  const std::string label_dir = [&] {
    const std::string name = std::string(label) + ".cu";
    const std::size_t slash = name.rfind('/');
    return slash == std::string::npos ? std::string() : slash == 0 ? std::string("/") : name.substr(0, slash);
  }();
  check(source.source, "its source", label_dir);
  for (const ProgramHeader& h : source.headers) {
    const std::size_t slash = h.name.rfind('/');
    const std::string_view dir = slash == std::string::npos ? std::string_view{} : std::string_view(h.name).substr(0, slash);
    check(h.source, "header '" + h.name + "'", dir);
  }
}

}  // namespace kiln::detail
