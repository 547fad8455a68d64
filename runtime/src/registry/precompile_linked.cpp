// kiln::precompile_linked: a table's linked units with code given now (an operator), compiled for an
// architecture into the disk cache as Registry::get(name, link) builds them on such a device.
#include <kiln/cache.hpp>
#include <kiln/error.hpp>
#include <kiln/precompile.hpp>
#include <kiln/remote.hpp>
#include <kiln/select.hpp>

#include "registry/query.hpp"  // make_chain

#include <algorithm>
#include <chrono>

namespace kiln {

std::vector<PrecompileResult> precompile_linked(const Catalog& catalog, unsigned arch,
                                                const std::vector<std::string>& kernels, const LinkedSource& link) {
  std::vector<std::uint32_t> units;  // in the order asked, each once
  for (const auto& name : kernels) {
    const KernelEntry* k = catalog.find(name);
    if (!k) throw Error(Errc::unknown_kernel, unknown_kernel_message(catalog, name));
    if (!catalog.units[k->unit].linked)
      throw Error(Errc::invalid_argument, "kiln: kernel '" + name + "' of registry " + std::string(catalog.name) +
                                              " is of unit '" + std::string(catalog.str(catalog.units[k->unit].name)) +
                                              "', which is not linked: it takes no code at run time (precompile it without one)");
    if (std::find(units.begin(), units.end(), k->unit) == units.end()) units.push_back(k->unit);
  }
  if (kernels.empty())
    for (std::uint32_t u = 0; u < catalog.units.size(); ++u)
      if (catalog.units[u].linked) units.push_back(u);
  if (units.empty())
    throw Error(Errc::invalid_argument, "kiln: registry " + std::string(catalog.name) + " has no linked unit to build with code");
  DiskCache& cache = default_cache();
  if (!cache.usable())
    throw Error(Errc::cache, "kiln: precompile fills the disk cache, which is not in use: " + cache.unusable_reason().message);
  RegistryOptions options;
  options.use_embedded = false;
  options.allow_ptx = false;
  options.cache = &cache;
  options.remote = &default_remote();
  const detail::TierChain chain = detail::make_chain(catalog, options);
  std::vector<PrecompileResult> done;
  for (const std::uint32_t u : units) {
    PrecompileResult r;
    r.unit = std::string(catalog.str(catalog.units[u].name));
    const auto start = std::chrono::steady_clock::now();
    try {
      // The chain for an architecture this machine may not have: the disk cache, the fleet's, then the JIT
      // tier, which links the unit with `link` (jit/build.hpp).
      r = chain.precompile(u, arch, &link).result;
    } catch (const Error& e) {
      if (e.code() == Errc::no_compiler || e.code() == Errc::cache) throw;  // nothing else would fare better
      r.error = {e.code(), e.what()};
    }
    r.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    done.push_back(std::move(r));
  }
  return done;
}

}  // namespace kiln
