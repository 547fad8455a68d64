// The parts a unit's source digest covers (its translation unit, options, name expressions and each header
// it includes), digested one by one and kept in the entries built from them, so that a later miss can say
// which part changed (`kiln why`).
//
// Where they are kept: after the first line of an entry's compiler field (CacheEntry::compiler), which no
// reader checks, so the entry format is unchanged and every kiln reads every entry. An entry made before
// these were kept has its compiler's line alone: its parts are unknown ("made by an older kiln").
#pragma once

#include "chain/unit_source.hpp"

#include <kiln/cache.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln::detail {

// "source", "options", "kernels", or "header <name>", and the first 16 hex digits of its SHA-256.
struct KeyPart {
  std::string name;
  std::string digest;
  friend bool operator==(const KeyPart&, const KeyPart&) = default;
};

// The parts of a unit: its translation unit, its options (one per line), its kernels' name expressions,
// and each header it includes as (name, bytes).
std::vector<KeyPart> key_parts(std::string_view source, std::string_view options,
                               const std::vector<std::string>& expressions,
                               const std::vector<std::pair<std::string_view, std::string_view>>& headers);

// The parts of `unit`: its source, its options one per line, its name expressions and its headers.
std::vector<KeyPart> key_parts(const UnitSource& unit);

// Records `parts` in `entry` (after its compiler's first line, replacing any recorded before), and how
// long its compile took where `compile_ms` > 0 (`kiln cache list` and `kiln why` show it).
void record_key_parts(CacheEntry& entry, const std::vector<KeyPart>& parts, double compile_ms = 0);
// The compile time `entry` records, in milliseconds, or nullopt.
std::optional<double> recorded_compile_ms(const CacheEntry& entry);
// The parts `entry` records, or nullopt when it records none (an entry made by an older kiln).
std::optional<std::vector<KeyPart>> recorded_key_parts(const CacheEntry& entry);
// What built `entry`: its compiler field's first line.
std::string_view compiler_line(const CacheEntry& entry);

// What differs between the parts `was` (an entry's) and `now` (the unit's), one phrase each, at most
// `most` headers named: "its translation unit", "header cub/util.cuh", "header a.h (no longer included)".
std::vector<std::string> changed_parts(const std::vector<KeyPart>& was, const std::vector<KeyPart>& now,
                                       std::size_t most = 5);

}  // namespace kiln::detail
