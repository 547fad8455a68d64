// A catalog's header bundle, decompressed once per process, and the headers of one unit out of it.
#include "jit/headers.hpp"

#include <kiln/error.hpp>

#include <zstd.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace kiln::detail {

namespace {

[[noreturn]] void damaged(const Catalog& catalog, const std::string& what) {
  throw Error(Errc::catalog, "kiln: the header bundle of registry '" + std::string(catalog.name) +
                                 "' cannot be read for the JIT tier: " + what + "; rebuild the catalog with kiln-gen");
}

// The decompressed bundle of `catalog`, made once per bundle and kept for the process: by its digest, so
// that a program given at run time, whose bundle lives in memory, never finds another's at a reused address.
const std::string& bundle(const Catalog& catalog) {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<const std::string>, std::less<>> bundles;
  const std::lock_guard lock(mutex);
  auto& kept = bundles[std::string(catalog.header_bundle_digest) + "@" +
                       std::to_string(reinterpret_cast<std::uintptr_t>(catalog.header_bundle))];
  if (kept) return *kept;
  if (catalog.header_bundle == nullptr || catalog.header_bundle_size == 0)
    damaged(catalog, "the catalog carries no headers (was it generated without a toolkit?)");
  auto raw = std::make_unique<std::string>(catalog.header_bundle_raw_size, '\0');
  const std::size_t got = ZSTD_decompress(raw->data(), raw->size(), catalog.header_bundle, catalog.header_bundle_size);
  if (ZSTD_isError(got)) damaged(catalog, std::string("zstd: ") + ZSTD_getErrorName(got));
  if (got != raw->size())
    damaged(catalog, "it decompresses to " + std::to_string(got) + " bytes, expected " + std::to_string(raw->size()));
  kept = std::move(raw);
  return *kept;
}

}  // namespace

std::vector<Header> unit_headers(const Catalog& catalog, const UnitEntry& unit) {
  std::vector<Header> headers;
  if (unit.header_count == 0) return headers;  // a unit that includes nothing needs no bundle
  const std::string& raw = bundle(catalog);
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
