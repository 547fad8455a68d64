// runtime/src/jit_worker.cpp — a compile worker's loop: hello, then one outcome frame per request frame, until EOF.
#include "jit_worker.hpp"

#include "jit_protocol.hpp"

#include <kiln/error.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <exception>

namespace kiln::detail {

namespace {

int fail(const std::string& what) {
  std::fprintf(stderr, "kiln-jitd[%ld]: %s\n", static_cast<long>(::getpid()), what.c_str());
  return 2;
}

std::string answer(const CompileFunction& compile, const CompileRequest& request) {
  try {
    return encode_outcome(compile(request));
  } catch (const kiln::Error& e) {
    return encode_failure({true, static_cast<std::uint32_t>(e.code()), e.what()});
  } catch (const std::exception& e) {
    return encode_failure({false, 0, e.what()});
  }
}

}  // namespace

int serve_compile_requests(int in, int out, const CompileFunction& compile) {
  if (out == STDOUT_FILENO) {
    out = ::fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
    if (out < 0 || ::dup2(STDERR_FILENO, STDOUT_FILENO) < 0) return fail("cannot move the frame stream off stdout");
  }
  if (const auto w = write_frame(out, encode_hello({::getpid(), kCacheFormatVersion})); w.status != IoStatus::ok)
    return fail("sending hello: " + w.error);
  for (;;) {
    const FrameRead read = read_frame(in);
    if (read.status == IoStatus::end_of_stream) return 0;
    if (read.status != IoStatus::ok) return fail("reading a request: " + read.error);
    const auto message = open_frame(read.frame);
    if (!message.ok()) return fail("reading a request: " + message.error);
    if (message.value.kind != MessageKind::request)
      return fail("expected a request, got message kind " + std::to_string(static_cast<unsigned>(message.value.kind)));
    const auto request = decode_request(message.value.body);
    if (!request.ok()) return fail(request.error);
    if (const auto w = write_frame(out, answer(compile, request.value)); w.status != IoStatus::ok)
      return fail("sending the outcome of unit " + request.value.unit + ": " + w.error);
  }
}

}  // namespace kiln::detail
