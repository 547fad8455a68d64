// Finds module-scope .global definitions in PTX and removes the unreferenced ones.
#include "jit/compiler/ptx_strip.hpp"

#include <optional>
#include <unordered_map>
#include <vector>

namespace kiln::detail {
namespace {

// Characters of a PTX identifier, including the % of register-like names; '.' starts a directive.
bool is_token_char(char c) noexcept {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '$' ||
         c == '%';
}

bool is_blank(char c) noexcept { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// Calls visit(token) for every identifier-like run in text[begin, end). Comments and strings are not
// skipped: a mention there only keeps a variable, it never removes one.
template <class Visit>
void for_each_token(std::string_view text, std::size_t begin, std::size_t end, Visit&& visit) {
  std::size_t i = begin;
  while (i < end) {
    if (!is_token_char(text[i])) {
      ++i;
      continue;
    }
    const std::size_t start = i;
    while (i < end && is_token_char(text[i])) ++i;
    visit(text.substr(start, i - start));
  }
}

// One module-scope statement: a directive ending in ';' (an initialiser's braces included) or a
// function with its body.
struct Statement {
  std::size_t begin = 0;
  std::size_t end = 0;       // one past the ';' or the body's closing '}'
  std::size_t head_end = 0;  // where the declaration ends: its '=', its body's '{', or `end`
  bool has_body = false;
};

// Skips a comment or string at text[i], returning the offset after it, or i when there is none.
std::size_t skip_comment_or_string(std::string_view text, std::size_t i) {
  if (text.compare(i, 2, "//") == 0) {
    const std::size_t eol = text.find('\n', i);
    return eol == std::string_view::npos ? text.size() : eol + 1;
  }
  if (text.compare(i, 2, "/*") == 0) {
    const std::size_t close = text.find("*/", i + 2);
    return close == std::string_view::npos ? text.size() : close + 2;
  }
  if (text[i] == '"') {
    std::size_t j = i + 1;
    while (j < text.size() && text[j] != '"') j += text[j] == '\\' ? 2 : 1;
    return j < text.size() ? j + 1 : text.size();
  }
  return i;
}

// Directives that end at the end of their line, with no ';'.
bool is_line_directive(std::string_view text, std::size_t i) {
  for (const std::string_view directive : {".version", ".target", ".address_size", ".file"}) {
    if (text.compare(i, directive.size(), directive) == 0 &&
        (i + directive.size() == text.size() || is_blank(text[i + directive.size()]))) {
      return true;
    }
  }
  return false;
}

// The module's statements in order, or nothing when the braces do not balance (not PTX we understand).
std::optional<std::vector<Statement>> split_module(std::string_view text) {
  std::vector<Statement> statements;
  std::size_t i = 0;
  while (i < text.size()) {
    if (const std::size_t next = skip_comment_or_string(text, i); next != i) {
      i = next;
      continue;
    }
    if (is_blank(text[i])) {
      ++i;
      continue;
    }
    Statement s;
    s.begin = i;
    if (is_line_directive(text, i)) {
      const std::size_t eol = text.find('\n', i);
      s.end = s.head_end = eol == std::string_view::npos ? text.size() : eol;
      statements.push_back(s);
      i = s.end;
      continue;
    }
    s.head_end = std::string_view::npos;
    int depth = 0;
    bool done = false;
    while (i < text.size() && !done) {
      if (const std::size_t next = skip_comment_or_string(text, i); next != i) {
        i = next;
        continue;
      }
      const char c = text[i++];
      if (c == '=' && depth == 0 && s.head_end == std::string_view::npos) {
        s.head_end = i - 1;
      } else if (c == '{') {
        // A brace before any '=' opens a function body; after one, an initialiser.
        if (depth == 0 && s.head_end == std::string_view::npos) {
          s.head_end = i - 1;
          s.has_body = true;
        }
        ++depth;
      } else if (c == '}') {
        if (--depth < 0) return std::nullopt;
        done = depth == 0 && s.has_body;
      } else if (c == ';') {
        done = depth == 0;
      }
    }
    if (depth != 0) return std::nullopt;
    s.end = i;
    if (s.head_end == std::string_view::npos) s.head_end = s.end;
    statements.push_back(s);
  }
  return statements;
}

// The variable a statement defines with internal linkage in the global state space, or empty.
// Externally visible ones (.visible, .weak, .common) and managed ones are kept: they exist for the host
// to look up by name (cuLibraryGetGlobal), which no text in the module shows; .extern only declares.
std::string_view defined_global(std::string_view text, const Statement& s) {
  if (s.has_body) return {};
  bool global = false;
  std::string_view name;
  int parens = 0;  // .attribute(.managed): what is inside parentheses is no name
  std::size_t i = s.begin;
  while (i < s.head_end) {
    if (const std::size_t next = skip_comment_or_string(text, i); next != i) {
      i = next;
      continue;
    }
    const char c = text[i];
    if (c == '(' || c == ')') {
      parens += c == '(' ? 1 : -1;
      ++i;
      continue;
    }
    if (c == ',' && parens == 0) return {};  // `.global .u32 a, b;`: a statement for several variables
    if (c != '.' && !is_token_char(c)) {
      if (c == '[' && !name.empty()) break;  // the array size follows the name
      ++i;
      continue;
    }
    std::size_t j = i + 1;
    while (j < s.head_end && is_token_char(text[j])) ++j;
    const std::string_view token = text.substr(i, j - i);
    i = j;
    if (token == ".global" && name.empty()) {
      global = true;
    } else if (!global) {
      return {};  // a variable definition starts with its state space; anything else is another statement
    } else if (token == ".visible" || token == ".weak" || token == ".common" || token == ".extern" ||
               token == ".attribute" || token == ".entry" || token == ".func") {
      return {};
    } else if (token[0] != '.' && parens == 0 && name.empty() && !(token[0] >= '0' && token[0] <= '9')) {
      name = token;
    }
  }
  return global ? name : std::string_view{};
}

// The range to cut for a statement: also its line's trailing blanks and newline, when nothing else
// follows it on that line.
std::size_t cut_end(std::string_view text, std::size_t end) {
  std::size_t i = end;
  while (i < text.size() && (text[i] == ' ' || text[i] == '\t' || text[i] == '\r')) ++i;
  if (i < text.size() && text[i] == '\n') return i + 1;
  return i == text.size() ? i : end;
}

}  // namespace

StrippedPtx strip_unreferenced_globals(std::string_view ptx) {
  const auto statements = split_module(ptx);
  if (!statements) return {std::string(ptx), 0};

  std::unordered_map<std::string_view, std::size_t> mentions;
  for_each_token(ptx, 0, ptx.size(), [&](std::string_view token) { ++mentions[token]; });

  // Variables by name; a name defined twice is never removed (its mentions count both definitions).
  std::unordered_map<std::string_view, std::size_t> definition;
  for (std::size_t k = 0; k < statements->size(); ++k) {
    const std::string_view name = defined_global(ptx, (*statements)[k]);
    if (!name.empty()) definition.emplace(name, k);
  }

  // A variable whose only mention is its own definition goes; its statement's tokens stop counting,
  // which may leave another variable mentioned only by its definition.
  std::vector<bool> removed(statements->size(), false);
  std::vector<std::size_t> pending;
  for (const auto& [name, k] : definition) {
    if (mentions[name] == 1) pending.push_back(k);
  }
  std::size_t removed_count = 0;
  while (!pending.empty()) {
    const std::size_t k = pending.back();
    pending.pop_back();
    if (removed[k]) continue;
    removed[k] = true;
    ++removed_count;
    const Statement& s = (*statements)[k];
    for_each_token(ptx, s.begin, s.end, [&](std::string_view token) {
      if (--mentions[token] != 1) return;
      if (const auto it = definition.find(token); it != definition.end() && !removed[it->second]) {
        pending.push_back(it->second);
      }
    });
  }

  StrippedPtx out;
  out.removed = removed_count;
  out.ptx.reserve(ptx.size());
  std::size_t copied = 0;
  for (std::size_t k = 0; k < statements->size(); ++k) {
    if (!removed[k]) continue;
    out.ptx.append(ptx.substr(copied, (*statements)[k].begin - copied));
    copied = cut_end(ptx, (*statements)[k].end);
  }
  out.ptx.append(ptx.substr(copied));
  return out;
}

}  // namespace kiln::detail
