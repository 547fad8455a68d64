// A catalog's header bundle, decompressed once per process, and the headers of one unit out of it.
#include "jit/headers.hpp"

#include "base/kept_programs.hpp"
#include "base/lru.hpp"

#include <kiln/error.hpp>

#include <zstd.h>

#include <memory>
#include <mutex>
#include <string>

namespace kiln::detail {

namespace {

[[noreturn]] void damaged(const Catalog& catalog, const std::string& what) {
  throw Error(Errc::catalog, "kiln: the header bundle of registry '" + std::string(catalog.name) +
                                 "' cannot be read for the JIT tier: " + what + "; rebuild the catalog with kiln-gen");
}

struct Bundle {
  std::string key;
  std::shared_ptr<const std::string> value;
};

// The decompressed bundle of `catalog`, made once and kept, by its digest, while it is among the
// KILN_PROGRAM_CACHE most recently used (catalogs loaded at run time come and go: kiln.Registry.load).
std::shared_ptr<const std::string> bundle(const Catalog& catalog) {
  static std::mutex& mutex = *new std::mutex;  // leaked: a compile may run during static destruction
  static auto& bundles = *new Lru<Bundle>;
  std::string key(catalog.header_bundle_digest);
  const std::size_t hash = std::hash<std::string>{}(key);
  const auto same = [&](const Bundle& b) { return b.key == key; };
  {
    const std::lock_guard lock(mutex);
    if (const Bundle* kept = bundles.find(hash, same)) return kept->value;
  }
  if (catalog.header_bundle == nullptr || catalog.header_bundle_size == 0)
    damaged(catalog, "the catalog carries no headers (was it generated without a toolkit?)");
  auto raw = std::make_shared<std::string>(catalog.header_bundle_raw_size, '\0');
  const std::size_t got = ZSTD_decompress(raw->data(), raw->size(), catalog.header_bundle, catalog.header_bundle_size);
  if (ZSTD_isError(got)) damaged(catalog, std::string("zstd: ") + ZSTD_getErrorName(got));
  if (got != raw->size())
    damaged(catalog, "it decompresses to " + std::to_string(got) + " bytes, expected " + std::to_string(raw->size()));
  const std::lock_guard lock(mutex);
  if (const Bundle* kept = bundles.find(hash, same)) return kept->value;
  return bundles.add(hash, Bundle{std::move(key), std::move(raw)}, kept_programs()).value;
}

}  // namespace

std::vector<Header> unit_headers(const Catalog& catalog, const UnitEntry& unit) {
  std::vector<Header> headers;
  if (unit.header_count == 0) return headers;  // a unit that includes nothing needs no bundle
  const std::shared_ptr<const std::string> held = bundle(catalog);
  const std::string& raw = *held;
  headers.reserve(unit.header_count);
  for (std::uint32_t i = 0; i < unit.header_count; ++i) {
    const std::uint32_t index = catalog.unit_headers[unit.first_header + i];
    if (index >= catalog.headers.size()) damaged(catalog, "a unit names a header the bundle does not have");
    const HeaderEntry& h = catalog.headers[index];
    if (std::size_t{h.offset} + h.size > raw.size()) damaged(catalog, "a header lies outside the bundle");
    headers.push_back({std::string(catalog.str(h.name)), raw.substr(h.offset, h.size)});
  }
  return headers;
}

}  // namespace kiln::detail
