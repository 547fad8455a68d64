// A launch the driver refuses comes back as kiln::Error naming the
// primitive and the kernel: CUB 3.0.1's own driver launcher drops such errors (every plan checks its
// dispatch with detail::check_dispatch, which this exercises on a real driver).
#include "prim_harness.hpp"

#include <kiln/prim/detail/cub_launch.cuh>

#include <string>

using namespace kiln::prim::detail;

TEST_CASE("primitives: a launch the driver refuses is a kiln::Error naming the primitive and the kernel") {
  kiln::test::PrimContext context;
  LaunchStatus status;
  LauncherFactory factory(device_of(kiln::prim::registry()), 90, &status);
  int argument = 1;
  const KernelRef no_such_kernel{nullptr, "exclusive_scan_i32_sweep"};
  const cudaError_t returned = factory(dim3(1), dim3(128), 0, nullptr).doit(no_such_kernel, argument);
  CHECK(returned != cudaSuccess);
  CHECK(status.result != CUDA_SUCCESS);
  try {
    check_dispatch(cudaSuccess, status, "exclusive_sum");  // what CUB's dispatch would have returned
    FAIL("expected kiln::Error");
  } catch (const kiln::Error& e) {
    const std::string what = e.what();
    CHECK(e.code() == kiln::Errc::driver);
    CHECK(what.find("exclusive_sum") != std::string::npos);
    CHECK(what.find("exclusive_scan_i32_sweep") != std::string::npos);
    CHECK(what.find("cuLaunchKernel") != std::string::npos);
  }
  // A dispatch error CUB reports itself is one too.
  CHECK_THROWS_AS(check_dispatch(cudaErrorInvalidValue, LaunchStatus{}, "exclusive_sum"), kiln::Error);
}
