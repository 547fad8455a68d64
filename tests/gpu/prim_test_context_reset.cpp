// A reset of the device's primary context between calls
// (cudaDeviceReset, cuDevicePrimaryCtxReset): the registry hands out kernels resolved in the new context,
// plans built before keep working (their kernels launch through context-independent handles, their
// workspace is allocated anew), and one-shot calls work. In the 'faults' group: it resets the device,
// so it runs in a process of its own.
#include "prim_harness.hpp"

#include <kiln/driver.hpp>
#include <kiln/prim/scan.hpp>

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

using namespace kiln::test;

namespace {

std::vector<std::int32_t> cpu_exclusive_sum(const std::vector<std::int32_t>& in) {
  std::vector<std::int32_t> out(in.size());
  std::int64_t sum = 0;
  for (std::size_t i = 0; i < in.size(); ++i) {
    out[i] = static_cast<std::int32_t>(sum);
    sum += in[i];
  }
  return out;
}

}  // namespace

TEST_CASE("primitives: a reset of the primary context between calls: kernels are resolved anew, plans and one-shot calls keep working") {
  kiln::Registry& registry = kiln::prim::registry();
  const std::size_t n = 1000003;
  const auto in = random_vector<std::int32_t>(n, 11, -1000, 1000);
  const auto expected = cpu_exclusive_sum(in);
  kiln::prim::ExclusiveSum<std::int32_t> plan;  // built (kernels loaded, workspace to come) before any reset
  const std::string sweep(plan.kernel().name);

  // The plan with its own workspace, then the one-shot function, on fresh device arrays in the context
  // as it is now.
  auto plan_and_one_shot_work = [&] {
    PrimContext context;
    DeviceArray<std::int32_t> d_in(in), d_out(n);
    d_out.poison();
    plan(d_in.get(), d_out.get(), n);
    const bool plan_ok = d_out.download() == expected;
    d_out.poison();
    kiln::prim::exclusive_sum(d_in.get(), d_out.get(), n);
    const bool one_shot_ok = d_out.download() == expected;
    CHECK(plan_ok);
    CHECK(one_shot_ok);
    return plan_ok && one_shot_ok;
  };
  REQUIRE(plan_and_one_shot_work());

  // cudaDeviceReset first: after a reset behind its back (the driver's), the runtime's own view is of the
  // old context, and its cudaDeviceReset leaves the new one alone (measured).
  for (const std::string how : {"cudaDeviceReset", "cuDevicePrimaryCtxReset"}) {
    CAPTURE(how);
    const kiln::Kernel before = registry.get(sweep);
    unsigned long long id_before = 0;
    REQUIRE(kiln::driver().cuCtxGetId(registry.context(), &id_before) == CUDA_SUCCESS);
    const auto reloads = registry.stats().context_reloads;

    if (how == "cudaDeviceReset") {
      PrimContext current;  // the runtime resets the current device's context: as a user's code would have it
      REQUIRE(cudaDeviceReset() == cudaSuccess);
    } else {
      REQUIRE(kiln::driver().cuDevicePrimaryCtxReset(kiln::prim::detail::device_of(registry)) == CUDA_SUCCESS);
    }
    // Nobody has used the context since: get() brings it back, and resolves the kernel in it.
    const kiln::Kernel after = registry.get(sweep);
    unsigned long long id_after = 0;
    REQUIRE(kiln::driver().cuCtxGetId(registry.context(), &id_after) == CUDA_SUCCESS);
    CHECK(id_after != id_before);
    CHECK(registry.stats().context_reloads == reloads + 1);
    CHECK(after.kernel == before.kernel);  // the library outlived the reset
    CHECK(after.provenance.source == before.provenance.source);
    int registers = 0;
    CHECK(kiln::driver().cuFuncGetAttribute(&registers, CU_FUNC_ATTRIBUTE_NUM_REGS, after.function) == CUDA_SUCCESS);
    CHECK(registers > 0);
    // The next get() is an in-memory hit again, of the new function.
    const kiln::Kernel hit = registry.get(sweep);
    CHECK(hit.provenance.tier == kiln::Tier::memory);
    CHECK(hit.function == after.function);
    CHECK(registry.stats().context_reloads == reloads + 1);

    CHECK(plan_and_one_shot_work());
  }
}
