// The one error type of the library: an exception with a code and a message that carries context, and the
// one way an answer says why not (Reason). Every public call throws Error and no other exception
// (std::bad_alloc aside), callbacks into kiln's work (a store you bring) included; inside, a step that
// can fail returns a Result with its reason (docs/DESIGN.md, "Errors (one model)").
#pragma once

#include <kiln/config.hpp>  // C++20, checked first

#include <stdexcept>
#include <string>
#include <string_view>

namespace kiln {

enum class Errc {
  unknown_kernel,  // no kernel of that name in the catalog
  no_driver,       // libcuda.so.1 could not be loaded
  no_device,       // the driver reports no usable GPU, or the ordinal is out of range
  no_binary,       // nothing embedded runs on this device's architecture
  driver,          // a CUDA driver call failed
  no_compiler,     // NVRTC or nvJitLink could not be loaded, so nothing can be JIT-compiled
  compile,         // the JIT tier failed to compile a unit: the message carries unit, options and full log
  cache,           // the disk cache (or the JIT tier's scratch directory) cannot do what was asked: which
                   // directory, why, and what to do
  catalog,         // a generated catalog lacks what was asked of it, or is damaged (its header bundle, an image)
  remote,          // the remote cache cannot do what was asked (`kiln cache push`, a store's call): which
                   // server, why, and what to do; the remote tier itself never throws it to get()
  invalid_argument,  // what the caller passed cannot be used: which argument, and what is accepted
};

std::string_view to_string(Errc code) noexcept;

class Error : public std::runtime_error {
 public:
  Error(Errc code, const std::string& message) : std::runtime_error(message), code_(code) {}
  Errc code() const noexcept { return code_; }

 private:
  Errc code_;
};

// Why something asked for is not there or was not done, where that is an answer and not a failure of the
// call: a plan that finds no tier, a cache lookup that misses, a unit precompile could not compile or keep,
// a cache not in use, a ping with no answer. The code and message an Error would carry for it (raise()
// throws that Error); empty when there is nothing to say: it is there, or was done.
struct Reason {
  Errc code = Errc::invalid_argument;  // meaningful only when not empty()
  std::string message;                 // names what and why, as an Error's does

  bool empty() const noexcept { return message.empty(); }
  [[noreturn]] void raise() const { throw Error(code, message); }
};

}  // namespace kiln
