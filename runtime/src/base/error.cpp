// Names of error codes, for logs and tests.
#include <kiln/error.hpp>

namespace kiln {

std::string_view to_string(Errc code) noexcept {
  switch (code) {
    case Errc::unknown_kernel: return "unknown_kernel";
    case Errc::no_driver: return "no_driver";
    case Errc::no_device: return "no_device";
    case Errc::no_binary: return "no_binary";
    case Errc::driver: return "driver";
    case Errc::no_compiler: return "no_compiler";
    case Errc::compile: return "compile";
    case Errc::cache: return "cache";
    case Errc::catalog: return "catalog";
    case Errc::remote: return "remote";
    case Errc::invalid_argument: return "invalid_argument";
  }
  return "unknown";
}

}  // namespace kiln
