// Sizes, counts and architectures from text: see base/parse.hpp.
#include "base/parse.hpp"

#include "base/settings.hpp"
#include "base/warn_once.hpp"

#include <charconv>
#include <cstdlib>
#include <string>

namespace kiln::detail {

namespace {

// The leading decimal digits of `text` as a number, and what follows them; nothing when there are no
// digits or the number does not fit. from_chars alone would accept neither a sign nor a space, which is
// what is wanted: those are refused here too.
struct Leading {
  std::uint64_t value = 0;
  std::string_view rest;
};
Result<Leading> leading_number(std::string_view text) {
  Leading r;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), r.value);
  if (ec == std::errc::result_out_of_range) return fail("too large");
  if (ec != std::errc() || end == text.data()) return fail("no number");
  r.rest = text.substr(static_cast<std::size_t>(end - text.data()));
  return r;
}

std::string quoted(std::string_view text) {
  std::string out = "'";  // appended, not "'" + ...: g++ 12 then warns falsely (-Wrestrict)
  out += text;
  out += '\'';
  return out;
}

}  // namespace

Result<std::uint64_t> parse_size(std::string_view text) {
  const auto refused = [&] {
    return fail(quoted(text) + " is not a size (a number of bytes, or one with K, M, G or T: 1073741824, 512M, 2G)");
  };
  const auto number = leading_number(text);
  if (!number) return refused();
  std::string_view suffix = number->rest;
  if (suffix.ends_with("iB") || suffix.ends_with("ib")) {
    suffix.remove_suffix(2);
    if (suffix.empty()) return refused();  // "5iB": a unit without its multiple
  }
  unsigned shift = 0;
  if (suffix.size() == 1) {
    switch (suffix[0]) {
      case 'k': case 'K': shift = 10; break;
      case 'm': case 'M': shift = 20; break;
      case 'g': case 'G': shift = 30; break;
      case 't': case 'T': shift = 40; break;
      default: return refused();
    }
  } else if (!suffix.empty()) {
    return refused();
  }
  if (shift != 0 && number->value > (UINT64_MAX >> shift)) return refused();
  return number->value << shift;
}

Result<std::uint64_t> parse_count(std::string_view text, std::uint64_t min, std::uint64_t max) {
  const auto number = leading_number(text);
  if (!number || !number->rest.empty() || number->value < min || number->value > max)
    return fail(quoted(text) + " is not a whole number from " + std::to_string(min) + " to " + std::to_string(max));
  return number->value;
}

Result<unsigned> parse_arch(std::string_view text) {
  const auto refused = [&] { return fail(quoted(text) + " is not an architecture like sm_90 (sm_ and 2 or 3 digits)"); };
  if (!text.starts_with("sm_")) return refused();
  const std::string_view digits = text.substr(3);
  if (digits.size() < 2 || digits.size() > 3 || digits.front() == '0') return refused();
  const auto number = leading_number(digits);
  if (!number || !number->rest.empty()) return refused();
  return static_cast<unsigned>(number->value);
}

Result<std::vector<std::pair<int, unsigned>>> parse_forced_archs(std::string_view value) {
  std::vector<std::pair<int, unsigned>> forced;
  std::string_view rest(value);
  while (!rest.empty()) {
    const std::size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    const std::size_t colon = item.find(':');
    const auto device = colon == std::string_view::npos ? fail("") : parse_count(item.substr(0, colon), 0, 1024);
    // "80" as well as "sm_80": the short form is what the examples give.
    const std::string_view arch_text = colon == std::string_view::npos ? std::string_view{} : item.substr(colon + 1);
    const auto arch = colon == std::string_view::npos ? fail("")
                      : arch_text.starts_with("sm_") ? parse_arch(arch_text)
                                                     : parse_arch("sm_" + std::string(arch_text));
    if (!device || !arch) return fail("not a list of DEVICE:ARCH (1:80,2:sm_86)");
    // Which of two architectures would the device take? Neither: the whole setting is refused.
    for (const auto& [named, _] : forced)
      if (named == static_cast<int>(*device)) return fail("device " + std::to_string(named) + " is named twice");
    forced.emplace_back(static_cast<int>(*device), *arch);
  }
  return forced;
}

std::vector<std::pair<int, unsigned>> forced_archs() {
  const std::string value = setting("KILN_DEVICE_ARCH");
  if (value.empty()) return {};
  auto forced = parse_forced_archs(value);
  if (!forced) {
    static WarnOnce warnings;
    warnings.warn("KILN_DEVICE_ARCH", "KILN_DEVICE_ARCH='" + value + "': " + forced.error() + "; ignoring it");
    return {};
  }
  return std::move(forced).value();
}

unsigned forced_arch(int ordinal) {
  for (const auto& [device, arch] : forced_archs())
    if (device == ordinal) return arch;
  return 0;
}

Result<bool> parse_switch(std::string_view text) {
  std::string lower(text);
  for (char& c : lower) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  if (lower == "on" || lower == "1" || lower == "true" || lower == "yes") return true;
  if (lower == "off" || lower == "0" || lower == "false" || lower == "no") return false;
  return fail(quoted(text) + " is neither on nor off (on, 1, true, yes / off, 0, false, no)");
}

}  // namespace kiln::detail
