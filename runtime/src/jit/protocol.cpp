// Encoding, checked decoding and pipe I/O of kiln-jitd frames; see jit/protocol.hpp.
#include "jit/protocol.hpp"

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

namespace kiln::detail {

static_assert(std::endian::native == std::endian::little, "the JIT protocol is little-endian; add byte swaps");

namespace {

std::uint64_t fnv1a(std::string_view bytes) noexcept {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (const char c : bytes) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  return h;
}

class Writer {
 public:
  explicit Writer(MessageKind kind) { u32(static_cast<std::uint32_t>(kind)); }

  template <typename T>
  void put(T value) {
    char bytes[sizeof(T)];
    std::memcpy(bytes, &value, sizeof(T));
    payload_.append(bytes, sizeof(T));
  }
  void u32(std::uint32_t v) { put(v); }
  void str(std::string_view s) {
    if (s.size() > kMaxFramePayload) throw Error(Errc::compile, "kiln: a JIT message field is larger than kMaxFramePayload");
    u32(static_cast<std::uint32_t>(s.size()));
    payload_ += s;
  }
  void strs(const std::vector<std::string>& list) {
    u32(static_cast<std::uint32_t>(list.size()));
    for (const auto& s : list) str(s);
  }

  std::string frame() && {
    if (payload_.size() > kMaxFramePayload) throw Error(Errc::compile, "kiln: a JIT message is larger than kMaxFramePayload");
    std::string out;
    out.reserve(kFrameHeaderSize + payload_.size() + kFrameTrailerSize);
    Writer header_writer;
    header_writer.u32(kJitMagic);
    header_writer.u32(kJitProtocolVersion);
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
  std::string payload_;
};

// Sequential reads over untrusted bytes; the first failed read records which field ran short, and
// every later read fails too, so a decoder checks once at the end.
class Reader {
 public:
  explicit Reader(std::string_view bytes) : rest_(bytes) {}

  template <typename T>
  T get(const char* field) {
    T value{};
    if (!take(sizeof(T), field)) return value;
    std::memcpy(&value, rest_.data() - sizeof(T), sizeof(T));
    return value;
  }
  // A value below `limit` (an enum's count); any other is refused, so that every message has one encoding.
  template <typename T>
  T below(const char* field, T limit) {
    const auto value = get<T>(field);
    if (value >= limit && invalid_.empty()) invalid_ = std::string(field) + " is " + std::to_string(value) + ", out of range";
    return value < limit ? value : T{};
  }
  // 0 or 1; any other byte is refused, so that every message has one encoding.
  bool flag(const char* field) {
    const auto value = get<std::uint8_t>(field);
    if (value > 1 && invalid_.empty()) invalid_ = std::string(field) + " is " + std::to_string(value) + ", not 0 or 1";
    return value != 0;
  }
  std::uint32_t u32(const char* field) { return get<std::uint32_t>(field); }
  std::string str(const char* field) {
    const std::uint32_t size = u32(field);
    if (!take(size, field)) return {};
    return std::string(rest_.data() - size, size);
  }
  // No reserve(count): the count is untrusted, and each element must prove itself with its bytes.
  std::vector<std::string> strs(const char* field) {
    std::vector<std::string> list;
    const std::uint32_t count = u32(field);
    for (std::uint32_t i = 0; i < count && error_.empty(); ++i) list.push_back(str(field));
    return list;
  }

  bool good() const noexcept { return error_.empty() && invalid_.empty(); }

  // Empty when every read succeeded and nothing is left over; else what went wrong, in `what`.
  std::string finish(std::string_view what) const {
    if (!error_.empty()) return std::string(what) + ": truncated in " + error_;
    if (!invalid_.empty()) return std::string(what) + ": " + invalid_;
    if (!rest_.empty()) return std::string(what) + ": " + std::to_string(rest_.size()) + " bytes after the last field";
    return {};
  }

 private:
  bool take(std::size_t n, const char* field) {
    if (!error_.empty()) return false;
    if (rest_.size() < n) {
      error_ = field;
      return false;
    }
    rest_.remove_prefix(n);
    return true;
  }

  std::string_view rest_;
  std::string error_;    // the field that ran short
  std::string invalid_;  // a field with a value no encoder writes
};

template <typename T>
Result<T> finished(T value, const Reader& in, std::string_view what) {
  std::string error = in.finish(what);
  if (!error.empty()) return fail(std::move(error));
  return value;
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

std::string encode_hello(const Hello& hello) {
  Writer out(MessageKind::hello);
  out.put<std::int64_t>(hello.pid);
  out.u32(hello.cache_format);
  out.put<std::uint8_t>(hello.pch_files ? 1 : 0);
  return std::move(out).frame();
}

std::string encode_request(const CompileRequest& r) {
  Writer out(MessageKind::request);
  out.str(r.registry);
  out.str(r.unit);
  out.str(r.source_name);
  out.str(r.source);
  out.strs(r.options);
  out.u32(static_cast<std::uint32_t>(r.headers.size()));
  for (const Header& h : r.headers) {
    out.str(h.name);
    out.str(h.content);
  }
  out.u32(static_cast<std::uint32_t>(r.kernels.size()));
  for (const CachedKernel& k : r.kernels) {
    out.str(k.name);
    out.str(k.lowered);
  }
  out.strs(r.expressions);
  out.u32(r.arch);
  out.put<std::uint8_t>(static_cast<std::uint8_t>(r.pch));
  out.str(r.pch_path);
  out.str(r.pch_unpacked);
  out.str(r.ptx);
  out.u32(r.link_threads);
  out.str(r.link_source);
  out.str(r.link_source_name);
  out.put<std::uint8_t>(r.link_lto_ir ? 1 : 0);
  out.str(r.unit_lto_ir);
  out.u32(r.code_arch);
  return std::move(out).frame();
}

std::string encode_outcome(const CompileOutcome& o) {
  Writer out(MessageKind::outcome);
  out.put<std::uint8_t>(o.entry ? 1 : 0);
  // The entry in the disk cache's encoding (one description of an entry), or why there is none.
  out.str(o.entry ? encode_payload(*o.entry) : o.entry.error());
  out.str(o.log);
  out.put<double>(o.nvrtc_ms);
  out.put<double>(o.link_ms);
  out.put<std::uint64_t>(o.globals_removed);
  out.put<std::uint8_t>(static_cast<std::uint8_t>(o.pch));
  out.put<double>(o.pch_unpack_ms);
  return std::move(out).frame();
}

std::string encode_failure(const Failure& f) {
  Writer out(MessageKind::failure);
  out.put<std::uint8_t>(f.kiln_error ? 1 : 0);
  out.u32(f.code);
  out.str(f.message);
  return std::move(out).frame();
}

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

Result<Hello> decode_hello(std::string_view body) {
  Reader in(body);
  Hello h;
  h.pid = in.get<std::int64_t>("pid");
  h.cache_format = in.u32("cache format");
  h.pch_files = in.flag("pch files flag");
  return finished(h, in, "hello");
}

Result<CompileRequest> decode_request(std::string_view body) {
  Reader in(body);
  CompileRequest r;
  r.registry = in.str("registry");
  r.unit = in.str("unit");
  r.source_name = in.str("source name");
  r.source = in.str("source");
  r.options = in.strs("options");
  const std::uint32_t headers = in.u32("header count");
  for (std::uint32_t i = 0; i < headers && in.good(); ++i) {
    Header h;
    h.name = in.str("header name");
    h.content = in.str("header content");
    r.headers.push_back(std::move(h));
  }
  const std::uint32_t kernels = in.u32("kernel count");
  for (std::uint32_t i = 0; i < kernels && in.good(); ++i) {
    CachedKernel k;
    k.name = in.str("kernel name");
    k.lowered = in.str("kernel lowered name");
    r.kernels.push_back(std::move(k));
  }
  r.expressions = in.strs("expressions");
  r.arch = in.u32("arch");
  r.pch = static_cast<PchMode>(in.below<std::uint8_t>("pch mode", static_cast<std::uint8_t>(PchMode::use) + 1));
  r.pch_path = in.str("pch path");
  r.pch_unpacked = in.str("unpacked pch path");
  r.ptx = in.str("ptx");
  r.link_threads = in.u32("link threads");
  r.link_source = in.str("link source");
  r.link_source_name = in.str("link source name");
  r.link_lto_ir = in.flag("link source is LTO-IR");
  r.unit_lto_ir = in.str("unit LTO-IR");
  r.code_arch = in.u32("code arch");
  return finished(std::move(r), in, "request");
}

Result<CompileOutcome> decode_outcome(std::string_view body) {
  Reader in(body);
  CompileOutcome o;
  const bool ok = in.flag("ok");
  std::string entry = in.str(ok ? "entry" : "error");
  o.log = in.str("log");
  o.nvrtc_ms = in.get<double>("nvrtc ms");
  o.link_ms = in.get<double>("link ms");
  o.globals_removed = static_cast<std::size_t>(in.get<std::uint64_t>("globals removed"));
  o.pch = static_cast<PchResult>(in.below<std::uint8_t>("pch result", static_cast<std::uint8_t>(PchResult::failed) + 1));
  o.pch_unpack_ms = in.get<double>("pch unpack ms");
  auto checked = finished(std::move(o), in, "outcome");
  if (!checked) return checked;
  if (!ok) {
    checked->entry = fail(std::move(entry));
    return checked;
  }
  auto parsed = parse_payload(entry);
  if (!parsed) return fail("outcome: entry " + parsed.error());
  checked->entry = std::move(parsed);
  return checked;
}

Result<Failure> decode_failure(std::string_view body) {
  Reader in(body);
  Failure f;
  f.kiln_error = in.flag("kiln error flag");
  f.code = in.u32("error code");
  f.message = in.str("message");
  return finished(std::move(f), in, "failure");
}

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
