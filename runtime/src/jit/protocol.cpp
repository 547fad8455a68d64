// Encoding, checked decoding and pipe I/O of kiln-jitd frames; see jit/protocol.hpp.
#include "jit/protocol.hpp"

#include "jit/protocol_fields.hpp"

#include <kiln/error.hpp>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <tuple>
#include <type_traits>
#include <vector>

namespace kiln::detail {

static_assert(std::endian::native == std::endian::little, "the JIT protocol is little-endian; add byte swaps");

// The wire format: each message's fields in the order they travel, one line each. The encoder and the
// decoder both walk these lists; a member left out of its list does not compile (lists_every_member).
// A field's C++ type says how it travels: bool a u8 flag (0 or 1), an enum its underlying type (a value
// past the `last` its field names is refused), a number its own bytes, a string its u32 size and bytes, a
// vector its u32 count and elements, a described struct its fields, an entry (Result<CacheEntry>) a flag
// and the disk cache's payload encoding or the error.
// Any change here is a change of the protocol: bump kJitProtocolVersion (jit/protocol.hpp).
template <>
struct Fields<Hello> {
  static constexpr auto list = std::tuple{
      field("pid", &Hello::pid),
      field("cache format", &Hello::cache_format),
      field("pch files flag", &Hello::pch_files),
  };
};

template <>
struct Fields<Header> {
  static constexpr auto list = std::tuple{
      field("header name", &Header::name),
      field("header content", &Header::content),
  };
};

template <>
struct Fields<CachedKernel> {
  static constexpr auto list = std::tuple{
      field("kernel name", &CachedKernel::name),
      field("kernel lowered name", &CachedKernel::lowered),
  };
};

template <>
struct Fields<CompileRequest> {
  using R = CompileRequest;
  static constexpr auto list = std::tuple{
      field("registry", &R::registry),
      field("unit", &R::unit),
      field("source name", &R::source_name),
      field("source", &R::source),
      field("options", &R::options),
      field("headers", &R::headers),
      field("kernels", &R::kernels),
      field("expressions", &R::expressions),
      field("arch", &R::arch),
      field("pch mode", &R::pch, PchMode::use),
      field("pch path", &R::pch_path),
      field("unpacked pch path", &R::pch_unpacked),
      field("ptx", &R::ptx),
      field("link threads", &R::link_threads),
      field("link source", &R::link_source),
      field("link source name", &R::link_source_name),
      field("link source is LTO-IR", &R::link_lto_ir),
      field("unit LTO-IR", &R::unit_lto_ir),
      field("code arch", &R::code_arch),
  };
};

template <>
struct Fields<CompileOutcome> {
  using O = CompileOutcome;
  static constexpr auto list = std::tuple{
      field("ok", &O::entry),  // the flag's name; the bytes after it are the "entry" or the "error"
      field("log", &O::log),
      field("nvrtc ms", &O::nvrtc_ms),
      field("link ms", &O::link_ms),
      field("globals removed", &O::globals_removed),
      field("pch result", &O::pch, PchResult::failed),
      field("pch unpack ms", &O::pch_unpack_ms),
      not_sent(&O::lowered),  // compile_unit has written them into the entry
  };
};

template <>
struct Fields<Failure> {
  static constexpr auto list = std::tuple{
      field("kiln error flag", &Failure::kiln_error),
      field("error code", &Failure::code),
      field("message", &Failure::message),
  };
};

static_assert(lists_every_member<Hello>() && lists_every_member<Header>() && lists_every_member<CachedKernel>() &&
                  lists_every_member<CompileRequest>() && lists_every_member<CompileOutcome>() &&
                  lists_every_member<Failure>(),
              "a message's field list leaves out a member, or names one twice: list it (or mark it not_sent) and "
              "bump kJitProtocolVersion");
// A number travels as its type's bytes: a std::size_t member is a u64 on the wire.
static_assert(sizeof(std::size_t) == 8, "the JIT protocol sends std::size_t as 8 bytes");

namespace {

std::uint64_t fnv1a(std::string_view bytes) noexcept {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (const char c : bytes) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  return h;
}

template <typename T>
concept Number = std::is_arithmetic_v<T> && !std::is_same_v<T, bool>;

class Writer {
 public:
  explicit Writer(MessageKind kind) { put(static_cast<std::uint32_t>(kind)); }

  // Every field of `message`, in its list's order.
  template <Described T>
  void message(const T& message) {
    std::apply([&](const auto&... entries) { (field(message, entries), ...); }, Fields<T>::list);
  }

  std::string frame() && {
    if (payload_.size() > kMaxFramePayload) throw Error(Errc::compile, "kiln: a JIT message is larger than kMaxFramePayload");
    std::string out;
    out.reserve(kFrameHeaderSize + payload_.size() + kFrameTrailerSize);
    Writer header_writer;
    header_writer.put(kJitMagic);
    header_writer.put(kJitProtocolVersion);
    header_writer.put<std::uint64_t>(payload_.size());
    out += header_writer.payload_;
    out += payload_;
    Writer trailer;
    trailer.put<std::uint64_t>(fnv1a(payload_));
    out += trailer.payload_;
    return out;
  }

 private:
  Writer() = default;

  template <typename S, typename M>
  void field(const S& message, const Field<S, M>& f) {
    write(message.*f.member);
  }
  template <typename S, typename M>
  void field(const S&, const NotSent<S, M>&) {}

  template <typename T>
  void put(T value) {
    char bytes[sizeof(T)];
    std::memcpy(bytes, &value, sizeof(T));
    payload_.append(bytes, sizeof(T));
  }
  void write(bool flag) { put<std::uint8_t>(flag ? 1 : 0); }
  template <Number T>
  void write(T value) {
    put(value);
  }
  template <typename E>
    requires std::is_enum_v<E>
  void write(E value) {
    put(static_cast<std::underlying_type_t<E>>(value));
  }
  void write(std::string_view s) {
    if (s.size() > kMaxFramePayload) throw Error(Errc::compile, "kiln: a JIT message field is larger than kMaxFramePayload");
    put(static_cast<std::uint32_t>(s.size()));
    payload_ += s;
  }
  void write(const std::string& s) { write(std::string_view(s)); }
  template <typename T>
  void write(const std::vector<T>& list) {
    put(static_cast<std::uint32_t>(list.size()));
    for (const T& element : list) write(element);
  }
  template <Described T>
  void write(const T& element) {
    message(element);
  }
  // The entry in the disk cache's encoding (one description of an entry), or why there is none.
  void write(const Result<CacheEntry>& entry) {
    write(entry.ok());
    write(entry ? encode_payload(*entry) : entry.error());
  }

  std::string payload_;
};

// Sequential reads over untrusted bytes; the first failed read records which field ran short, and
// every later read fails too, so a decoder checks once at the end.
class Reader {
 public:
  explicit Reader(std::string_view bytes) : rest_(bytes) {}

  // Every field of `message`, in its list's order; stops reading at the first that fails.
  template <Described T>
  void message(T& message) {
    std::apply([&](const auto&... entries) { (field(message, entries), ...); }, Fields<T>::list);
  }

  // Empty when every read succeeded and nothing is left over; else what went wrong, in `what`.
  std::string finish(std::string_view what) const {
    if (!error_.empty()) return std::string(what) + ": truncated in " + error_;
    if (!invalid_.empty()) return std::string(what) + ": " + invalid_;
    if (!rest_.empty()) return std::string(what) + ": " + std::to_string(rest_.size()) + " bytes after the last field";
    return {};
  }

 private:
  bool good() const noexcept { return error_.empty() && invalid_.empty(); }
  void refuse(std::string why) {
    if (invalid_.empty()) invalid_ = std::move(why);
  }

  template <typename S, typename M>
  void field(S& message, const Field<S, M>& f) {
    if (good()) read(message.*f.member, f.name, f.limit);
  }
  template <typename S, typename M>
  void field(S&, const NotSent<S, M>&) {}

  template <typename T>
  T get(const char* name) {
    T value{};
    if (!take(sizeof(T), name)) return value;
    std::memcpy(&value, rest_.data() - sizeof(T), sizeof(T));
    return value;
  }
  // 0 or 1; any other byte is refused, so that every message has one encoding.
  void read(bool& flag, const char* name, std::uint64_t) {
    const auto value = get<std::uint8_t>(name);
    if (value > 1) refuse(std::string(name) + " is " + std::to_string(value) + ", not 0 or 1");
    flag = value != 0;
  }
  template <Number T>
  void read(T& value, const char* name, std::uint64_t) {
    value = get<T>(name);
  }
  // A value below `limit` (one past the enum's largest); any other is refused, so that every message has
  // one encoding.
  template <typename E>
    requires std::is_enum_v<E>
  void read(E& value, const char* name, std::uint64_t limit) {
    const auto raw = get<std::underlying_type_t<E>>(name);
    if (raw >= limit) refuse(std::string(name) + " is " + std::to_string(raw) + ", out of range");
    value = raw < limit ? static_cast<E>(raw) : E{};
  }
  void read(std::string& s, const char* name, std::uint64_t) {
    const auto size = get<std::uint32_t>(name);
    if (take(size, name)) s.assign(rest_.data() - size, size);
  }
  // No reserve(count): the count is untrusted, and each element must prove itself with its bytes.
  template <typename T>
  void read(std::vector<T>& list, const char* name, std::uint64_t limit) {
    const auto count = get<std::uint32_t>(name);
    for (std::uint32_t i = 0; i < count && good(); ++i) read(list.emplace_back(), name, limit);
  }
  template <Described T>
  void read(T& element, const char*, std::uint64_t) {
    message(element);
  }
  void read(Result<CacheEntry>& entry, const char* name, std::uint64_t limit) {
    bool ok = false;
    read(ok, name, limit);
    std::string bytes;
    read(bytes, ok ? "entry" : "error", 0);
    if (!good()) return;
    if (!ok) {
      entry = fail(std::move(bytes));
    } else if (Result<CacheEntry> parsed = parse_payload(bytes); parsed) {
      entry = std::move(parsed);
    } else {
      refuse("entry " + parsed.error());
    }
  }

  bool take(std::size_t n, const char* name) {
    if (!error_.empty()) return false;
    if (rest_.size() < n) {
      error_ = name;
      return false;
    }
    rest_.remove_prefix(n);
    return true;
  }

  std::string_view rest_;
  std::string error_;    // the field that ran short
  std::string invalid_;  // a field with a value no encoder writes
};

template <Described T>
std::string encode(MessageKind kind, const T& message) {
  Writer out(kind);
  out.message(message);
  return std::move(out).frame();
}

template <Described T>
Result<T> decode(std::string_view body, std::string_view what) {
  Reader in(body);
  T message;
  in.message(message);
  std::string error = in.finish(what);
  if (!error.empty()) return fail(std::move(error));
  return message;
}

std::string hex32(std::uint32_t v) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%08x", v);
  return text;
}

// The header's fields, checked; shared by open_frame and read_frame so both refuse the same frames.
Result<std::uint64_t> check_header(std::string_view header) {
  std::uint32_t magic, version;
  std::uint64_t size;
  std::memcpy(&magic, header.data(), 4);
  std::memcpy(&version, header.data() + 4, 4);
  std::memcpy(&size, header.data() + 8, 8);
  if (magic != kJitMagic) return fail("bad magic " + hex32(magic) + " (not a kiln-jitd frame)");
  if (version != kJitProtocolVersion)
    return fail("protocol version " + std::to_string(version) + ", expected " + std::to_string(kJitProtocolVersion));
  if (size < 4) return fail("payload size " + std::to_string(size) + " out of range: smaller than a message kind");
  if (size > kMaxFramePayload)
    return fail("payload size " + std::to_string(size) + " out of range: larger than any request or outcome (the cap is " +
                std::to_string(kMaxFramePayload) + " bytes)");
  return size;
}

}  // namespace

std::string encode_hello(const Hello& hello) { return encode(MessageKind::hello, hello); }
std::string encode_request(const CompileRequest& request) { return encode(MessageKind::request, request); }
std::string encode_outcome(const CompileOutcome& outcome) { return encode(MessageKind::outcome, outcome); }
std::string encode_failure(const Failure& failure) { return encode(MessageKind::failure, failure); }

Result<Message> open_frame(std::string_view frame) {
  if (frame.size() < kFrameHeaderSize + 4 + kFrameTrailerSize)
    return fail("frame of " + std::to_string(frame.size()) + " bytes is shorter than any message");
  const auto size = check_header(frame.substr(0, kFrameHeaderSize));
  if (!size) return fail(size.error());
  const std::uint64_t expected = kFrameHeaderSize + *size + kFrameTrailerSize;
  if (frame.size() != expected)
    return fail("frame is " + std::to_string(frame.size()) + " bytes, its header says " + std::to_string(expected));
  const std::string_view payload = frame.substr(kFrameHeaderSize, static_cast<std::size_t>(*size));
  std::uint64_t checksum;
  std::memcpy(&checksum, frame.data() + kFrameHeaderSize + payload.size(), 8);
  if (checksum != fnv1a(payload)) return fail("checksum mismatch");
  std::uint32_t kind;
  std::memcpy(&kind, payload.data(), 4);
  if (kind < static_cast<std::uint32_t>(MessageKind::hello) || kind > static_cast<std::uint32_t>(MessageKind::failure))
    return fail("unknown message kind " + std::to_string(kind));
  return Message{static_cast<MessageKind>(kind), payload.substr(4)};
}

Result<Hello> decode_hello(std::string_view body) { return decode<Hello>(body, "hello"); }
Result<CompileRequest> decode_request(std::string_view body) { return decode<CompileRequest>(body, "request"); }
Result<CompileOutcome> decode_outcome(std::string_view body) { return decode<CompileOutcome>(body, "outcome"); }
Result<Failure> decode_failure(std::string_view body) { return decode<Failure>(body, "failure"); }

namespace {

// Waits until `fd` is ready for `events`; false when keep_waiting gave up.
bool wait_ready(int fd, short events, const KeepWaiting& keep_waiting) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, kPollMs);
    if (n > 0) return true;  // ready, or hung up / error: the next read or write says which
    if (n < 0 && errno != EINTR) return true;
    if (n == 0 && keep_waiting && !keep_waiting()) return false;
  }
}

// Reads exactly buf.size() bytes; returns how many were read before the end of the stream.
struct Filled {
  IoStatus status;
  std::size_t got;
  std::string error;
};
Filled fill(int fd, char* buf, std::size_t size, const KeepWaiting& keep_waiting) {
  std::size_t got = 0;
  while (got < size) {
    const ssize_t n = ::read(fd, buf + got, size - got);
    if (n > 0) {
      got += static_cast<std::size_t>(n);
    } else if (n == 0) {
      return {IoStatus::end_of_stream, got, {}};
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!wait_ready(fd, POLLIN, keep_waiting)) return {IoStatus::abandoned, got, {}};
    } else if (errno != EINTR) {
      return {IoStatus::error, got, std::string("read: ") + std::strerror(errno)};
    }
  }
  return {IoStatus::ok, got, {}};
}

}  // namespace

FrameRead read_frame(int fd, const KeepWaiting& keep_waiting) {
  FrameRead r;
  r.frame.resize(kFrameHeaderSize);
  const Filled header = fill(fd, r.frame.data(), kFrameHeaderSize, keep_waiting);
  if (header.status == IoStatus::end_of_stream && header.got == 0) return {IoStatus::end_of_stream, {}, {}};
  if (header.status == IoStatus::end_of_stream)
    return {IoStatus::error, {}, "stream ended after " + std::to_string(header.got) + " of 16 header bytes"};
  if (header.status != IoStatus::ok) return {header.status, {}, header.error};
  const auto size = check_header(r.frame);
  if (!size) return {IoStatus::error, {}, size.error()};
  const std::size_t rest = static_cast<std::size_t>(*size) + kFrameTrailerSize;
  // The buffer grows with what arrives (at most doubling what is there), never to what the header
  // claims before the bytes come: a header alone, or a peer that stops, costs kFirstChunk.
  constexpr std::size_t kFirstChunk = 64 * 1024;
  std::size_t got = 0;
  while (got < rest) {
    const std::size_t want = std::min(rest, std::max(kFirstChunk, 2 * got));
    r.frame.resize(kFrameHeaderSize + want);
    const Filled body = fill(fd, r.frame.data() + kFrameHeaderSize + got, want - got, keep_waiting);
    got += body.got;
    if (body.status == IoStatus::end_of_stream)
      return {IoStatus::error, {}, "stream ended after " + std::to_string(got) + " of " + std::to_string(rest) +
                                       " payload and trailer bytes"};
    if (body.status != IoStatus::ok) return {body.status, {}, body.error};
  }
  r.status = IoStatus::ok;
  return r;
}

namespace {

WriteResult write_all(int fd, std::string_view frame, const KeepWaiting& keep_waiting) {
  while (!frame.empty()) {
    const ssize_t n = ::write(fd, frame.data(), frame.size());
    if (n >= 0) {
      frame.remove_prefix(static_cast<std::size_t>(n));
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!wait_ready(fd, POLLOUT, keep_waiting)) return {IoStatus::abandoned, {}};
    } else if (errno == EPIPE) {
      return {IoStatus::end_of_stream, "write: the reader closed the pipe"};
    } else if (errno != EINTR) {
      return {IoStatus::error, std::string("write: ") + std::strerror(errno)};
    }
  }
  return {};
}

}  // namespace

WriteResult write_frame(int fd, std::string_view frame, const KeepWaiting& keep_waiting) {
  return write_all(fd, frame, keep_waiting);
}

}  // namespace kiln::detail
