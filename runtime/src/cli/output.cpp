// Tables, sizes and the JSON writer of the command line.
#include "cli/output.hpp"

#include <kiln/error.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>

namespace kiln::cli {

bool Table::print(std::string_view indent, std::size_t width) const {
  std::vector<std::size_t> widths;
  for (const auto& r : rows_) {
    widths.resize(std::max(widths.size(), r.size()));
    for (std::size_t i = 0; i < r.size(); ++i) widths[i] = std::max(widths[i], r[i].size());
  }
  // Narrow the widest column, one character at a time, until a full row fits (no column below kNarrowest).
  constexpr std::size_t kNarrowest = 16;
  const auto line_width = [&] {
    std::size_t total = indent.size();
    for (const std::size_t w : widths) total += w + 2;
    return widths.empty() ? total : total - 2;
  };
  for (std::size_t excess = line_width() > width ? line_width() - width : 0; excess > 0; --excess) {
    const auto widest = std::max_element(widths.begin(), widths.end());
    if (*widest <= kNarrowest) break;
    --*widest;
  }
  bool abbreviated = false;
  for (const auto& r : rows_) {
    std::string line(indent);
    for (std::size_t i = 0; i < r.size(); ++i) {
      const std::string cell = r[i].size() > widths[i] ? abbreviate(r[i], widths[i]) : r[i];
      abbreviated = abbreviated || cell.size() != r[i].size();
      line += cell;
      if (i + 1 < r.size()) line += std::string(widths[i] - cell.size() + 2, ' ');
    }
    std::cout << line << '\n';
  }
  return abbreviated;
}

std::string abbreviate(std::string_view text, std::size_t width) {
  constexpr std::string_view kMark = "...";
  if (text.size() <= width) return std::string(text);
  if (width <= kMark.size()) return std::string(text.substr(0, width));
  const std::size_t room = width - kMark.size(), head = room - room / 3;
  return std::string(text.substr(0, head)).append(kMark).append(text.substr(text.size() - (room - head)));
}

std::string fixed1(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", value);
  return text;
}

std::string kib(std::size_t bytes) { return fixed1(static_cast<double>(bytes) / 1024.0) + " KiB"; }

std::string human(std::uint64_t bytes) {
  constexpr const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes) / 1024.0;
  std::size_t u = 0;
  for (; value >= 1024.0 && u + 1 < std::size(units); ++u) value /= 1024.0;
  return fixed1(value) + " " + units[u];
}

std::string count(std::size_t n, std::string_view one, std::string_view many) {
  return std::to_string(n) + " " + std::string(n == 1 ? one : many);
}

std::string ago(std::time_t then, std::time_t now) {
  const std::int64_t s = std::max<std::int64_t>(0, now - then);
  return s < 120 ? std::to_string(s) + " s" : s < 7200 ? std::to_string(s / 60) + " min"
         : s < 172800 ? std::to_string(s / 3600) + " h" : std::to_string(s / 86400) + " d";
}

std::string json_string(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char escaped[8];
          std::snprintf(escaped, sizeof escaped, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
          out += escaped;
        } else {
          out += c;  // UTF-8 passes through as it is
        }
    }
  }
  return out + "\"";
}

void Json::before_value() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!open_.empty()) {
    if (!open_.back().empty) text_ += ",";
    open_.back().empty = false;
    text_ += '\n';
    text_.append(open_.size(), ' ');
  }
}

Json& Json::open(char opener, char closer) {
  before_value();
  text_ += opener;
  open_.push_back({closer});
  return *this;
}

Json& Json::object() { return open('{', '}'); }
Json& Json::array() { return open('[', ']'); }

Json& Json::end() {
  if (open_.empty()) throw Error(Errc::invalid_argument, "kiln: Json::end() with nothing open");
  const Open closed = open_.back();
  open_.pop_back();
  if (!closed.empty) {
    text_ += '\n';
    text_.append(open_.size(), ' ');
  }
  text_ += closed.closer;
  return *this;
}

Json& Json::key(std::string_view k) {
  before_value();
  text_ += json_string(k) + ": ";
  after_key_ = true;
  return *this;
}

Json& Json::value(std::string_view v) {
  before_value();
  text_ += json_string(v);
  return *this;
}

Json& Json::value(std::uint64_t v) {
  before_value();
  text_ += std::to_string(v);
  return *this;
}

Json& Json::value(int v) {
  before_value();
  text_ += std::to_string(v);
  return *this;
}

Json& Json::value(double v) {
  before_value();
  if (!std::isfinite(v)) {
    text_ += "null";  // JSON has no NaN or infinity
  } else {
    char text[32];
    std::snprintf(text, sizeof text, "%.3f", v);
    text_ += text;
  }
  return *this;
}

Json& Json::value(bool v) {
  before_value();
  text_ += v ? "true" : "false";
  return *this;
}

Json& Json::null() {
  before_value();
  text_ += "null";
  return *this;
}

std::string Json::str() const {
  if (!open_.empty()) throw Error(Errc::invalid_argument, "kiln: Json::str() with an object or array still open");
  return text_ + "\n";
}

}  // namespace kiln::cli
