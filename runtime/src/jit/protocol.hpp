// The framed messages between libkiln and its kiln-jitd compile workers, over pipes.
//
// Frame (all integers little-endian):
//   u32 magic "KJIT", u32 version (kJitProtocolVersion), u64 payload size (at most kMaxFramePayload),
//   payload: u32 message kind, then the message's fields,
//   u64 FNV-1a of the payload.
// Fields: u8 flag, u32 count, u64, f64, str (u32 size + bytes), str list (u32 count + strs). Each
// message's fields are listed once, in their order on the wire (Fields<T> in jit/protocol.cpp); the
// encoder and the decoder both follow that list.
// Messages: hello (the worker's first frame: its pid, cache format, and whether it can read PCH files),
// request (a CompileRequest), outcome (a CompileOutcome; its CacheEntry as the disk cache's payload
// encoding), failure (an exception the compile function threw). Decoding checks every size against the
// bytes left and rejects trailing bytes, so a truncated or garbage frame is an error string, never a
// crash or a huge allocation.
#pragma once

#include "chain/entry.hpp"  // Result<T>
#include "jit/compiler/compile.hpp"

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace kiln::detail {

inline constexpr std::uint32_t kJitMagic = 0x54494A4B;  // "KJIT" in file order
// !!! The protocol version. Bump it on ANY change to the frame, a message's fields or their order, to
// !!! Errc's numbering, or to kCacheFormatVersion (outcomes carry the cache entry payload). A worker of
// !!! another version is refused at its hello and the pool compiles in-process instead.
// 2: fork and forked; 3: fork names its family; 4: an outcome is an entry or an error, Errc gained cache
// and catalog; 5: no forks; headers in memory, PCH files, PTX, link threads; hello says if ASLR is off;
// 6: link source, its name, LTO-IR flag; 7: the unit's embedded LTO-IR and the code's architecture;
// 8: kCacheFormatVersion 2; 9: a request's PCH unpacked by the host, an outcome's unpacking time;
// 10: kCacheFormatVersion 3.
inline constexpr std::uint32_t kJitProtocolVersion = 10;
inline constexpr std::size_t kFrameHeaderSize = 16;
inline constexpr std::size_t kFrameTrailerSize = 8;
// The largest message: an outcome holds an entry's payload (at most kMaxPayloadBytes, 64 MiB, chain/entry.hpp)
// and the compiler's log; a request a unit's source (a 2,000-line unit is ~100 KB) and, passed in memory,
// its headers (CUB's bundle: 9.1 MB). 128 MiB covers both with room; a larger size is refused from the
// header, and read_frame allocates as bytes arrive, so a header alone costs nothing (docs/DESIGN.md).
inline constexpr std::uint64_t kMaxFramePayload = std::uint64_t{128} << 20;

enum class MessageKind : std::uint32_t { hello = 1, request = 2, outcome = 3, failure = 4 };

struct Hello {
  std::int64_t pid = 0;
  std::uint32_t cache_format = 0;  // kCacheFormatVersion of the worker's build
  bool pch_files = false;          // it runs with ASLR off, so NVRTC reads PCH files (jit/pch_store.hpp)
};

// An exception thrown by the worker's compile function, so that the pool rethrows what an in-process
// compile_unit would have thrown (kiln::Error(no_compiler) when NVRTC cannot be loaded).
struct Failure {
  bool kiln_error = false;  // a kiln::Error, with `code`; else a std::exception
  std::uint32_t code = 0;   // static_cast of kiln::Errc
  std::string message;
};

// Whole frames, ready to write.
std::string encode_hello(const Hello& hello);
std::string encode_request(const CompileRequest& request);
std::string encode_outcome(const CompileOutcome& outcome);
std::string encode_failure(const Failure& failure);

// A checked frame: its kind, and the message fields after the kind (a view into the frame).
struct Message {
  MessageKind kind{};
  std::string_view body;
};
// Checks magic, version, size, checksum, and that nothing follows the trailer.
Result<Message> open_frame(std::string_view frame);

Result<Hello> decode_hello(std::string_view body);
Result<CompileRequest> decode_request(std::string_view body);
Result<CompileOutcome> decode_outcome(std::string_view body);
Result<Failure> decode_failure(std::string_view body);

// The environment variable in which the pool gives a worker its host's pid, so that the worker dies
// with its host (jit/worker/serve.hpp, die_with_host).
inline constexpr const char* kHostPidVariable = "KILN_JITD_HOST";

// Pipe I/O. Blocking and O_NONBLOCK descriptors both work; on a non-blocking one, `keep_waiting` is
// asked every kPollMs of silence and returning false abandons the transfer (for shutdown and for a
// worker that died while another process still holds its pipe). Never raises SIGPIPE's default action
// by itself: a write to a closed pipe is an error result (EPIPE) when the caller has SIGPIPE blocked.
using KeepWaiting = std::function<bool()>;
inline constexpr int kPollMs = 100;

enum class IoStatus { ok, end_of_stream, error, abandoned };
struct FrameRead {
  IoStatus status = IoStatus::error;
  std::string frame;  // when ok: header, payload and trailer, the header already checked
  std::string error;  // when error: what was wrong ("bad magic 0x...", "truncated after 7 of 16 header bytes")
};
// end_of_stream only when the stream ends before the first byte of a frame.
FrameRead read_frame(int fd, const KeepWaiting& keep_waiting = {});
struct WriteResult {
  IoStatus status = IoStatus::ok;
  std::string error;
};
WriteResult write_frame(int fd, std::string_view frame, const KeepWaiting& keep_waiting = {});

}  // namespace kiln::detail
