// A unit's key parts: digests, their lines in an entry's compiler field, and what differs between two sets.
#include "chain/key_parts.hpp"

#include "chain/key.hpp"

#include <algorithm>
#include <map>

namespace kiln::detail {

namespace {

// The line that starts the parts in a compiler field; each part is then "<digest> <name>".
constexpr std::string_view kPartsLine = "\nkey parts:\n";
// The line before them that says how long its compile took: "compile ms: <whole milliseconds>".
constexpr std::string_view kCompileMsLine = "\ncompile ms: ";

std::string short_digest(std::string_view bytes) { return sha256_hex(bytes).substr(0, 16); }

}  // namespace

std::vector<KeyPart> key_parts(std::string_view source, std::string_view options,
                               const std::vector<std::string>& expressions,
                               const std::vector<std::pair<std::string_view, std::string_view>>& headers) {
  std::vector<KeyPart> parts;
  parts.push_back({"source", short_digest(source)});
  parts.push_back({"options", short_digest(options)});
  std::string joined;
  for (const auto& e : expressions) joined.append(e).push_back('\n');
  parts.push_back({"kernels", short_digest(joined)});
  for (const auto& [name, bytes] : headers) {
    std::string shown(name);
    std::replace(shown.begin(), shown.end(), '\n', '?');  // a part is one line
    parts.push_back({"header " + shown, short_digest(bytes)});
  }
  return parts;
}

std::vector<KeyPart> key_parts(const UnitSource& unit) {
  std::string options;
  for (const std::string& o : unit.options) options.append(options.empty() ? "" : "\n").append(o);
  std::vector<std::pair<std::string_view, std::string_view>> headers;
  for (const Header& h : unit.headers) headers.emplace_back(h.name, h.content);
  return key_parts(unit.source, options, unit.expressions, headers);
}

std::string_view compiler_line(const CacheEntry& entry) {
  const std::string_view c = entry.compiler;
  return c.substr(0, c.find('\n'));
}

void record_key_parts(CacheEntry& entry, const std::vector<KeyPart>& parts, double compile_ms) {
  std::string text(compiler_line(entry));
  if (compile_ms > 0) text += std::string(kCompileMsLine) + std::to_string(static_cast<long long>(compile_ms + 0.5));
  text += kPartsLine;
  for (const KeyPart& p : parts) text.append(p.digest).append(" ").append(p.name).append("\n");
  entry.compiler = std::move(text);
}

std::optional<std::vector<KeyPart>> recorded_key_parts(const CacheEntry& entry) {
  const std::string_view c = entry.compiler;
  const auto at = c.find(kPartsLine);
  if (at == std::string_view::npos) return std::nullopt;
  std::vector<KeyPart> parts;
  for (std::string_view rest = c.substr(at + kPartsLine.size()); !rest.empty();) {
    const std::string_view line = rest.substr(0, rest.find('\n'));
    rest.remove_prefix(std::min(rest.size(), line.size() + 1));
    const auto space = line.find(' ');
    if (space == std::string_view::npos) continue;  // not a part: nothing to compare
    parts.push_back({std::string(line.substr(space + 1)), std::string(line.substr(0, space))});
  }
  return parts;
}

std::optional<double> recorded_compile_ms(const CacheEntry& entry) {
  const std::string_view c = entry.compiler;
  const auto at = c.find(kCompileMsLine);
  if (at == std::string_view::npos || at > c.find(kPartsLine)) return std::nullopt;
  double ms = 0;
  for (std::size_t i = at + kCompileMsLine.size(); i < c.size() && c[i] >= '0' && c[i] <= '9'; ++i) ms = ms * 10 + (c[i] - '0');
  if (ms <= 0 || ms > 1e9) return std::nullopt;
  return ms;
}

std::vector<std::string> changed_parts(const std::vector<KeyPart>& was, const std::vector<KeyPart>& now,
                                       std::size_t most) {
  std::map<std::string, std::string> before;
  for (const KeyPart& p : was) before[p.name] = p.digest;
  std::vector<std::string> changed, headers;
  const auto name_of = [](const std::string& part) {
    return part == "source" ? std::string("its translation unit")
           : part == "options" ? std::string("its options")
           : part == "kernels" ? std::string("its kernels' name expressions")
                               : part;
  };
  for (const KeyPart& p : now) {
    const auto it = before.find(p.name);
    const bool header = p.name.starts_with("header ");
    if (it == before.end()) (header ? headers : changed).push_back(name_of(p.name) + " (newly included)");
    else if (it->second != p.digest) (header ? headers : changed).push_back(name_of(p.name));
    if (it != before.end()) before.erase(it);
  }
  for (const auto& [name, digest] : before)
    (name.starts_with("header ") ? headers : changed).push_back(name_of(name) + " (no longer included)");
  for (std::size_t i = 0; i < headers.size() && i < most; ++i) changed.push_back(headers[i]);
  if (headers.size() > most) changed.push_back(std::to_string(headers.size() - most) + " more headers");
  return changed;
}

}  // namespace kiln::detail
