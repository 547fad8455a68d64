// A registry's units linked with code given at run time (Registry::get with a LinkedSource): one library
// per (unit, link source), loaded once and kept for the registry's life.
#pragma once

#include "registry/registry_impl.hpp"

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>

namespace kiln {

struct Registry::Impl::LinkedUnits {
  struct Unit {
    CUlibrary library = nullptr;
    detail::UnitImage image;  // the cubin the library was loaded from, its tier and cache key
    std::set<std::uint32_t> handed_out;  // kernels (catalog indices) got from it: a second get is a memory hit
  };
  // Serialises the first link of each (unit, source) in this registry; later gets of a linked kernel
  // take it briefly too (they are a plan's construction, not its calls).
  std::mutex mutex;
  // Key: the unit's index, then the link source's SHA-256.
  std::map<std::pair<std::uint32_t, std::string>, std::unique_ptr<Unit>> units;
};

}  // namespace kiln
