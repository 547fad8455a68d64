// What the command line prints: aligned tables and sizes for people, JSON for scripts (`--json`).
#pragma once

#include <cstdint>
#include <ctime>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::cli {

// The longest line `kiln list` prints: a wider row has its widest cells abbreviated (`--json` keeps
// them whole).
inline constexpr std::size_t kLineWidth = 160;

// Rows of cells printed with left-aligned columns, each as wide as its widest cell, or narrower where a
// line would pass `width`: then the widest columns are narrowed, and a cell wider than its column keeps its
// start and end around "...". Returns whether a cell was abbreviated.
class Table {
 public:
  void row(std::vector<std::string> cells) { rows_.push_back(std::move(cells)); }
  bool print(std::string_view indent, std::size_t width = SIZE_MAX) const;

 private:
  std::vector<std::vector<std::string>> rows_;
};

std::string fixed1(double value);                   // "3.2"
std::string kib(std::size_t bytes);                 // "45.0 KiB"
std::string human(std::uint64_t bytes);             // 1.0 GiB, 3.2 MiB, 45.0 KiB: for sizes that may be anything
std::string count(std::size_t n, std::string_view one, std::string_view many);  // "1 unit", "3 units"
std::string ago(std::time_t then, std::time_t now);  // how long before `now` `then` was: "40 s", "12 min", "3 h", "5 d"
// `text` in at most `width` characters: its start, "...", its end (two thirds of the room to the start).
std::string abbreviate(std::string_view text, std::size_t width);

// A JSON document written as it is built: objects and arrays nest, commas and escapes are its business.
// (Hand-written: a JSON library would be one more build dependency, for a few flat objects of output.)
class Json {
 public:
  Json& object();                  // {  (as a value: after key(), in an array, or at the top)
  Json& array();                   // [
  Json& end();                     // } or ]
  Json& key(std::string_view k);   // "k": (inside an object)
  Json& value(std::string_view v);
  Json& value(const char* v) { return value(std::string_view(v)); }
  Json& value(const std::string& v) { return value(std::string_view(v)); }
  Json& value(std::uint64_t v);
  Json& value(unsigned v) { return value(static_cast<std::uint64_t>(v)); }
  Json& value(int v);
  Json& value(double v);
  Json& value(bool v);
  Json& null();
  // key(k).value(v), the common case.
  template <typename T>
  Json& field(std::string_view k, const T& v) { return key(k).value(v); }
  // The document, with a newline; every object and array must be closed (else Error(invalid_argument), as
  // for an end() with nothing open).
  std::string str() const;

 private:
  struct Open {
    char closer;         // '}' or ']'
    bool empty = true;   // nothing written in it yet
  };
  void before_value();
  Json& open(char opener, char closer);
  std::string text_;
  std::vector<Open> open_;
  bool after_key_ = false;
};

std::string json_string(std::string_view text);  // "text", escaped as JSON requires

}  // namespace kiln::cli
