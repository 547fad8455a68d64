// A LauncherFactory whose device queries were answered when the plan was built (nvcc only).
//
// DispatchReduce and DispatchSegmentedReduce ask for the SM count and a kernel's occupancy on every call
// (KernelConfig::Init, util_device.cuh); a plan calls CUB's dispatch twice per call (size, then run). The
// answers cannot change for a plan's kernel on its device, so the plan asks once, with the same query CUB
// makes, and CUB's dispatch reads them back here: no driver round trips on the hot path, same numbers.
#pragma once

#include <kiln/prim/detail/cub_launch.cuh>

namespace kiln::prim::detail {

// What the plan asked when it was built: the device's SM count, and the occupancy of one kernel at the
// block size its policy launches it with (no dynamic shared memory, as CUB asks).
struct DeviceAnswers {
  int sm_count = 0;
  CUfunction kernel = nullptr;
  int block_threads = 0;
  int occupancy = 0;
};

class AnsweredLauncherFactory : public LauncherFactory {
 public:
  AnsweredLauncherFactory(const LauncherFactory& factory, const DeviceAnswers& answers)
      : LauncherFactory(factory), answers_(answers) {}

  cudaError_t MultiProcessorCount(int& count) const {
    if (answers_.sm_count > 0) {
      count = answers_.sm_count;
      return cudaSuccess;
    }
    return LauncherFactory::MultiProcessorCount(count);
  }

  cudaError_t MaxSmOccupancy(int& occupancy, KernelRef kernel, int block_threads, int dynamic_shared = 0) const {
    if (kernel.function == answers_.kernel && block_threads == answers_.block_threads && dynamic_shared == 0 &&
        answers_.occupancy > 0) {
      occupancy = answers_.occupancy;
      return cudaSuccess;
    }
    return LauncherFactory::MaxSmOccupancy(occupancy, kernel, block_threads, dynamic_shared);
  }

 private:
  DeviceAnswers answers_;
};

}  // namespace kiln::prim::detail
