// Runs the primitives' tests, or exits 77 (skipped) without a CUDA driver or GPU.
// First it makes every primitive kernel ready at once (precompile_all + ensure_warm), so that in a build
// without this GPU's arch the JIT tier compiles them all in parallel, and prints how long that took.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <kiln/driver.hpp>
#include <kiln/error.hpp>
#include <kiln/prim/common.hpp>

#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)  // listing needs no GPU
    if (std::string(argv[i]).rfind("--list", 0) == 0) return doctest::Context(argc, argv).run();
  try {
    kiln::driver();
  } catch (const kiln::Error& e) {
    std::printf("gpu suite skipped: %s\n", e.what());
    return 77;
  }
  kiln::Registry& registry = kiln::prim::registry();
  registry.context();
  std::vector<std::string> names;
  for (const auto& k : registry.catalog().kernels) {
    // Linked units are built with an operator, when a plan is made (prim_test_operator.cpp).
    if (!registry.catalog().units[k.unit].linked) names.emplace_back(registry.catalog().str(k.name));
  }
  const auto t0 = std::chrono::steady_clock::now();
  registry.precompile_all();
  const auto cold = registry.ensure_warm(names, std::chrono::minutes(10));
  for (const auto& name : names) registry.get(name);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::map<std::string, int> tiers;
  for (const auto& k : registry.status().kernels) ++tiers[std::string(kiln::to_string(k.tier))];
  std::printf("primitives: %zu kernels ready in %.1f ms (", names.size(), ms);
  for (const auto& [tier, count] : tiers) std::printf(" %s: %d", tier.c_str(), count);
  std::printf(" ); %zu still cold after the wait\n", cold.size());
  doctest::Context context(argc, argv);
  return context.run();
}
