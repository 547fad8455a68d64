// LibFuzzer target: the JIT protocol's frame and message decoders, which read what worker processes send the host.
#include "jit/protocol.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string_view>

namespace {

void require(bool invariant) {
  if (!invariant) std::abort();  // a crash is what libFuzzer reports
}

// A message that decodes must be in canonical form: encoding it again gives the same body.
template <typename T, typename Encode>
void round_trip(const kiln::detail::Result<T>& decoded, std::string_view body, Encode encode) {
  if (!decoded.ok()) return;
  const std::string frame = encode(*decoded);
  const auto reopened = kiln::detail::open_frame(frame);
  require(reopened.ok() && reopened->body == body);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace kiln::detail;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);

  // What the host does with a frame read from a worker (and a worker with one from the host).
  if (const auto message = open_frame(bytes); message.ok()) {
    (void)decode_hello(message->body);
    (void)decode_request(message->body);
    (void)decode_outcome(message->body);
    (void)decode_failure(message->body);
  }

  // What read_frame does with these bytes as a stream (a memfd): frames whose header checks out, read as
  // their bytes arrive; what it returns is exactly the stream's next bytes.
  static const int stream = [] {
    const int fd = ::memfd_create("fuzz_jit_frame", MFD_CLOEXEC);
    require(fd >= 0);
    return fd;
  }();
  require(::ftruncate(stream, 0) == 0 && ::pwrite(stream, data, size, 0) == static_cast<ssize_t>(size) &&
          ::lseek(stream, 0, SEEK_SET) == 0);
  std::size_t at = 0;
  for (int frames = 0; frames < 64; ++frames) {
    const FrameRead read = read_frame(stream);
    if (read.status != IoStatus::ok) break;
    require(read.frame.size() >= kFrameHeaderSize + kFrameTrailerSize && at + read.frame.size() <= size &&
            bytes.substr(at, read.frame.size()) == read.frame);
    at += read.frame.size();
  }

  // Mutations of a frame rarely get past its checksum, so every decoder also gets the raw bytes as a
  // message body. The body starts with the message kind, as in a frame.
  if (bytes.size() < 4) return 0;
  const std::string_view body = bytes.substr(4);
  round_trip(decode_hello(body), body, [](const Hello& m) { return encode_hello(m); });
  round_trip(decode_request(body), body, [](const CompileRequest& m) { return encode_request(m); });
  round_trip(decode_outcome(body), body, [](const CompileOutcome& m) { return encode_outcome(m); });
  round_trip(decode_failure(body), body, [](const Failure& m) { return encode_failure(m); });
  return 0;
}
