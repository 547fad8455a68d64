// kiln::program(): the programs of this process found again by their content, at most KILN_PROGRAM_CACHE
// of them, the least recently used forgotten first (docs/DESIGN.md, "Programs given at run time").
#include <kiln/program.hpp>

#include "base/kept_programs.hpp"
#include "base/lru.hpp"
#include "program/program_cache.hpp"

#include <algorithm>
#include <mutex>
#include <tuple>

namespace kiln {
namespace {

// What finds a program by its content: a cheap hash of a sample of it, then every byte compared.
std::size_t sample_hash(const ProgramSource& s, int device) {
  std::size_t h = std::hash<int>{}(device) ^ (s.source.size() * 0x9e3779b97f4a7c15ull);
  const auto mix = [&h](std::string_view bytes) {
    h ^= bytes.size() + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    const std::size_t step = std::max<std::size_t>(1, bytes.size() / 64);
    for (std::size_t i = 0; i < bytes.size(); i += step) h = (h ^ static_cast<unsigned char>(bytes[i])) * 0x100000001b3ull;
  };
  mix(s.source);
  for (const auto& e : s.name_expressions) mix(e);
  for (const auto& o : s.options) mix(o);
  for (const auto& hd : s.headers) mix(hd.source);
  return h;
}

bool same_options(const RegistryOptions& a, const RegistryOptions& b) {
  return std::tie(a.allow_ptx, a.use_embedded, a.cache, a.use_jit, a.remote, a.use_remote) ==
         std::tie(b.allow_ptx, b.use_embedded, b.cache, b.use_jit, b.remote, b.use_remote);
}

struct Known {
  int device;
  RegistryOptions options;
  std::shared_ptr<Program> value;
};

struct Programs {
  std::mutex mutex;
  detail::Lru<Known> known;
};

// Leaked on purpose: programs may be asked for during static destruction.
Programs& programs() {
  static Programs& p = *new Programs;
  return p;
}

}  // namespace

std::shared_ptr<Program> program(const ProgramSource& source, int device, RegistryOptions options) {
  Programs& p = programs();
  const std::size_t h = sample_hash(source, device);
  const auto same = [&](const Known& k) {
    return k.device == device && same_options(k.options, options) && detail::has_content(*k.value, source);
  };
  {
    const std::lock_guard lock(p.mutex);
    if (const Known* k = p.known.find(h, same)) return k->value;
  }
  // Made outside the lock: hashing include directories can take a while. Two threads making the same
  // program keep the first.
  auto made = std::make_shared<Program>(source, device, options);
  const std::lock_guard lock(p.mutex);
  if (const Known* k = p.known.find(h, same)) return k->value;
  return p.known.add(h, Known{device, options, made}, detail::kept_programs()).value;
}

namespace detail {

std::size_t programs_kept() {
  Programs& p = programs();
  const std::lock_guard lock(p.mutex);
  return p.known.size();
}

}  // namespace detail
}  // namespace kiln
