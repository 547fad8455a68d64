// Turns the outcome of a CUB dispatch into kiln's error model.
#include "cub_launch.cuh"

#include <string>

namespace kiln::prim::detail {

void check_dispatch(cudaError_t returned, const LaunchStatus& status, std::string_view primitive) {
  if (status.result != CUDA_SUCCESS) {
    const char* name = nullptr;
    const char* text = nullptr;
    kiln::driver().cuGetErrorName(status.result, &name);
    kiln::driver().cuGetErrorString(status.result, &text);
    std::string message = "kiln::prim::" + std::string(primitive) + ": " + status.what;
    if (!status.kernel.empty()) message += " of kernel '" + std::string(status.kernel) + "'";
    message += " failed: " + std::string(name ? name : "?") + " (" + (text ? text : "unknown error") + ")";
    throw kiln::Error(Errc::driver, message);
  }
  if (returned != cudaSuccess) {
    throw kiln::Error(Errc::driver, "kiln::prim::" + std::string(primitive) + ": CUB's dispatch failed: " +
                                        cudaGetErrorName(returned) + " (" + cudaGetErrorString(returned) + ")");
  }
}

}  // namespace kiln::prim::detail
