// kiln-jitd frames: every field survives a round trip; the committed frames pin the wire format;
// truncated, damaged and garbage frames are refused.
#include <kiln/cache.hpp>
#include <doctest/doctest.h>

#include "cache_test_util.hpp"
#include "jit/protocol.hpp"
#include "jit/protocol_fields.hpp"  // member_count

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <thread>
#include <type_traits>

using namespace kiln::detail;

namespace {

CompileRequest sample_request() {
  CompileRequest r;
  r.registry = "examples";
  r.unit = "scale";
  r.source_name = "examples.scale.cu";
  r.source = std::string("template <typename T> __global__ void scale(T*);\n\0with a NUL", 60);
  r.options = {"--use_fast_math", "-std=c++17", ""};
  r.headers = {{"kiln_examples/scale.cuh", "#pragma once\n"}, {"cub/config.cuh", std::string("a\0b", 3)}};
  r.kernels = {{"scale_f32", "_ZN13kiln_examples5scaleIfEEvPKT_PS1_S1_i"}, {"scale_f64", "_Z5scaleIdEv"}};
  r.expressions = {"kiln_examples::scale<float>", "kiln_examples::scale<double>"};
  r.arch = 90;
  r.pch = PchMode::use;
  r.pch_path = "/home/u/.cache/kiln/v1/0123.pch";
  r.pch_unpacked = "/proc/4321/fd/17";
  r.ptx = ".version 9.0\n.target sm_90\n";
  r.link_threads = 7;
  r.link_source = std::string("\x7f" "LTO\0ir", 7);  // bytes, NUL included
  r.link_source_name = "LTO-IR operator 'op' of kiln::prim::ReduceWith<float>";
  r.link_lto_ir = true;
  r.unit_lto_ir = std::string("\x50\xed\x55\xba\0fatbin", 11);
  r.code_arch = 80;
  return r;
}

CompileOutcome sample_outcome() {
  CompileOutcome o;
  o.entry = kiln::test::sample_entry(3, 90, 4096);
  o.log = "warning: something\n";
  o.nvrtc_ms = 812.25;
  o.link_ms = 31.5;
  o.globals_removed = 1093;
  o.pch = PchResult::used;
  o.pch_unpack_ms = 212.75;
  return o;
}

// The members in which two messages differ, by name: written here member by member, apart from the
// protocol's field lists, so that a member a list leaves out comes back different. member_count makes a
// member added to a message fail to compile here until it is compared too.
struct Differences {
  std::vector<std::string> names;
  template <typename T>
  void compare(const char* name, const T& a, const T& b) {
    if (!same(a, b)) names.push_back(name);
  }
  template <typename T>
  static bool same(const T& a, const T& b) {
    return a == b;
  }
  static bool same(const std::vector<Header>& a, const std::vector<Header>& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                      [](const Header& x, const Header& y) { return x.name == y.name && x.content == y.content; });
  }
  static bool same(const std::vector<kiln::CachedKernel>& a, const std::vector<kiln::CachedKernel>& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const kiln::CachedKernel& x, const kiln::CachedKernel& y) {
      return x.name == y.name && x.lowered == y.lowered;
    });
  }
  static bool same(const Result<kiln::CacheEntry>& a, const Result<kiln::CacheEntry>& b) {
    return a.ok() == b.ok() && (a.ok() ? kiln::test::same_entry(*a, *b) : a.error() == b.error());
  }
};

static_assert(member_count<CompileRequest>() == 19, "compare the new member in differences(CompileRequest)");
std::vector<std::string> differences(const CompileRequest& a, const CompileRequest& b) {
  Differences d;
  d.compare("registry", a.registry, b.registry);
  d.compare("unit", a.unit, b.unit);
  d.compare("source_name", a.source_name, b.source_name);
  d.compare("source", a.source, b.source);
  d.compare("options", a.options, b.options);
  d.compare("headers", a.headers, b.headers);
  d.compare("kernels", a.kernels, b.kernels);
  d.compare("expressions", a.expressions, b.expressions);
  d.compare("arch", a.arch, b.arch);
  d.compare("pch", a.pch, b.pch);
  d.compare("pch_path", a.pch_path, b.pch_path);
  d.compare("pch_unpacked", a.pch_unpacked, b.pch_unpacked);
  d.compare("ptx", a.ptx, b.ptx);
  d.compare("link_threads", a.link_threads, b.link_threads);
  d.compare("link_source", a.link_source, b.link_source);
  d.compare("link_source_name", a.link_source_name, b.link_source_name);
  d.compare("link_lto_ir", a.link_lto_ir, b.link_lto_ir);
  d.compare("unit_lto_ir", a.unit_lto_ir, b.unit_lto_ir);
  d.compare("code_arch", a.code_arch, b.code_arch);
  return d.names;
}

static_assert(member_count<CompileOutcome>() == 8, "compare the new member in differences(CompileOutcome)");
std::vector<std::string> differences(const CompileOutcome& a, const CompileOutcome& b) {
  Differences d;
  d.compare("entry", a.entry, b.entry);
  d.compare("log", a.log, b.log);
  d.compare("nvrtc_ms", a.nvrtc_ms, b.nvrtc_ms);
  d.compare("link_ms", a.link_ms, b.link_ms);
  d.compare("globals_removed", a.globals_removed, b.globals_removed);
  d.compare("pch", a.pch, b.pch);
  d.compare("pch_unpack_ms", a.pch_unpack_ms, b.pch_unpack_ms);
  d.compare("lowered", a.lowered, b.lowered);
  return d.names;
}

static_assert(member_count<Hello>() == 3, "compare the new member in differences(Hello)");
std::vector<std::string> differences(const Hello& a, const Hello& b) {
  Differences d;
  d.compare("pid", a.pid, b.pid);
  d.compare("cache_format", a.cache_format, b.cache_format);
  d.compare("pch_files", a.pch_files, b.pch_files);
  return d.names;
}

static_assert(member_count<Failure>() == 3, "compare the new member in differences(Failure)");
std::vector<std::string> differences(const Failure& a, const Failure& b) {
  Differences d;
  d.compare("kiln_error", a.kiln_error, b.kiln_error);
  d.compare("code", a.code, b.code);
  d.compare("message", a.message, b.message);
  return d.names;
}

// The message as the other side of the pipe reads it.
template <typename T>
T round_trip(const T& message) {
  std::string frame;
  if constexpr (std::is_same_v<T, CompileRequest>) frame = encode_request(message);
  if constexpr (std::is_same_v<T, CompileOutcome>) frame = encode_outcome(message);
  if constexpr (std::is_same_v<T, Hello>) frame = encode_hello(message);
  if constexpr (std::is_same_v<T, Failure>) frame = encode_failure(message);
  const auto m = open_frame(frame);
  REQUIRE_MESSAGE(m.ok(), m.error());
  Result<T> back = fail("no decoder");
  if constexpr (std::is_same_v<T, CompileRequest>) back = decode_request(m->body);
  if constexpr (std::is_same_v<T, CompileOutcome>) back = decode_outcome(m->body);
  if constexpr (std::is_same_v<T, Hello>) back = decode_hello(m->body);
  if constexpr (std::is_same_v<T, Failure>) back = decode_failure(m->body);
  REQUIRE_MESSAGE(back.ok(), back.error());
  return std::move(back).value();
}

// Every member of `sample` is away from its default, and all but `stays` come back as they went.
template <typename T>
void check_every_field_travels(const T& sample, const std::string& stays = "") {
  const auto names = [](const std::vector<std::string>& list) {
    std::string text;
    for (const std::string& name : list) text += (text.empty() ? "" : ", ") + name;
    return text;
  };
  CHECK(differences(sample, T{}).size() == member_count<T>());  // the sample sets every member
  CHECK(names(differences(sample, round_trip(sample))) == stays);
}

// A message body decoded as `kind`: empty when it decodes, else why not.
std::string decode_body(MessageKind kind, std::string_view body) {
  switch (kind) {
    case MessageKind::hello: return decode_hello(body).error();
    case MessageKind::request: return decode_request(body).error();
    case MessageKind::outcome: return decode_outcome(body).error();
    case MessageKind::failure: return decode_failure(body).error();
  }
  return "unreachable";
}

// Every way of decoding a frame, as the pool and the worker would: open it, then decode its kind.
std::string decode_any(std::string_view frame) {
  const auto m = open_frame(frame);
  return m.ok() ? decode_body(m->kind, m->body) : m.error();
}

std::vector<std::string> sample_frames() {
  return {encode_hello({1234, kiln::kCacheFormatVersion, true}), encode_request(sample_request()),
          encode_outcome(sample_outcome()), encode_failure({true, 5, "kiln: cannot load libnvrtc.so"})};
}

}  // namespace

TEST_CASE("every message survives a round trip with every field set") {
  check_every_field_travels(sample_request());
  CompileOutcome outcome = sample_outcome();
  outcome.lowered = {"_Z5scaleIfEvv"};  // compile_unit has written them into the entry: they stay here
  check_every_field_travels(outcome, "lowered");
  check_every_field_travels(Hello{1234, kiln::kCacheFormatVersion, true});
  check_every_field_travels(Failure{true, 5, "kiln: cannot load libnvrtc.so"});
}

TEST_CASE("a failed outcome travels as its error, and a long log as it is") {
  CompileOutcome failed;
  failed.entry = kiln::detail::fail("examples/scale for sm_90: nvrtcCompileProgram failed");
  failed.log = std::string(100000, 'e');
  const CompileOutcome back = round_trip(failed);
  CHECK_FALSE(back.entry.ok());
  CHECK(differences(failed, back).empty());
}

// The golden frames pin the wire format of this protocol version: a change to a message's fields, their
// order or their encoding without a bump of kJitProtocolVersion fails here. KILN_TEST_GOLDEN_DIR:
// tests/cpu/golden in the source tree. To write the frames of a new version (and delete the old version's
// file, which no worker speaks any more):
//   KILN_UPDATE_GOLDEN=1 build/tests/test_cpu -tc='the golden frames*'
namespace {

std::filesystem::path golden_frames_path() {
  return std::filesystem::path(KILN_TEST_GOLDEN_DIR) / ("jit_frames_v" + std::to_string(kJitProtocolVersion) + ".bin");
}

// A fixed input, apart from the samples above (which other tests may change): every field set.
std::string golden_frames() {
  CompileRequest r;
  r.registry = "golden";
  r.unit = "unit";
  r.source_name = "golden.unit.cu";
  r.source = "__global__ void k() {}\n";
  r.options = {"-std=c++17", "-DG=1"};
  r.headers = {{"a.cuh", "#pragma once\n"}};
  r.kernels = {{"k", "_Z1kv"}};
  r.expressions = {"k"};
  r.arch = 120;
  r.pch = PchMode::create;
  r.pch_path = "/cache/v1/ab.pch";
  r.pch_unpacked = "/proc/1/fd/3";
  r.ptx = ".version 9.0\n";
  r.link_threads = 3;
  r.link_source = "op";
  r.link_source_name = "operator op";
  r.link_lto_ir = true;
  r.unit_lto_ir = "ir";
  r.code_arch = 90;
  CompileOutcome o;  // a failed one: an entry's bytes are the disk cache's format, pinned by its own golden entry
  o.entry = fail("golden/unit for sm_120: nvrtcCompileProgram failed");
  o.log = "error: golden\n";
  o.nvrtc_ms = 1.5;
  o.link_ms = 0.25;
  o.globals_removed = 42;
  o.pch = PchResult::rejected;
  o.pch_unpack_ms = 2.75;
  return encode_hello({4321, 3, true}) + encode_request(r) + encode_outcome(o) +
         encode_failure({true, 6, "kiln: cannot load libnvrtc.so"});
}

// The frame's message decoded and encoded again; or why it does not decode.
Result<std::string> encode_again(const Message& m) {
  const auto again = [](auto decoded, auto encode) -> Result<std::string> {
    if (!decoded) return fail(decoded.error());
    return encode(*decoded);
  };
  switch (m.kind) {
    case MessageKind::hello: return again(decode_hello(m.body), encode_hello);
    case MessageKind::request: return again(decode_request(m.body), encode_request);
    case MessageKind::outcome: return again(decode_outcome(m.body), encode_outcome);
    case MessageKind::failure: return again(decode_failure(m.body), encode_failure);
  }
  return fail("unknown kind");
}

}  // namespace

TEST_CASE("the golden frames of this protocol version are what the encoders write, and decode to what encodes back to them") {
  const auto path = golden_frames_path();
  const char* update = std::getenv("KILN_UPDATE_GOLDEN");
  if (update != nullptr && std::strcmp(update, "1") == 0) {
    kiln::test::write_bytes(path, golden_frames());
    MESSAGE("KILN_UPDATE_GOLDEN=1: rewrote " << path.string());
  }
  INFO("If you changed a message's fields, their order or their encoding, bump kJitProtocolVersion in "
       "jit/protocol.hpp and write the golden frames of the new version with KILN_UPDATE_GOLDEN=1.");
  REQUIRE_MESSAGE(std::filesystem::exists(path), "no golden frames for protocol version ", kJitProtocolVersion, ": ",
                  path.string());
  const std::string golden = kiln::test::read_bytes(path);
  CHECK(golden == golden_frames());
  // Each frame decodes, and its message encodes back to the same bytes.
  std::size_t frames = 0;
  for (std::size_t at = 0; at + kFrameHeaderSize <= golden.size(); ++frames) {
    REQUIRE(frames < 4);
    std::uint64_t size;
    std::memcpy(&size, golden.data() + at + 8, 8);
    REQUIRE(size <= golden.size());
    const std::string_view frame = std::string_view(golden).substr(at, kFrameHeaderSize + size + kFrameTrailerSize);
    at += frame.size();
    const auto m = open_frame(frame);
    REQUIRE_MESSAGE(m.ok(), m.error());
    const Result<std::string> again = encode_again(*m);
    REQUIRE_MESSAGE(again.ok(), again.error());
    CHECK(*again == frame);
  }
  CHECK(frames == 4);
}

TEST_CASE("every truncation of a frame, and of a message body, is an error that names where it ran short") {
  for (const std::string& frame : sample_frames()) {
    for (std::size_t n = 0; n < frame.size(); ++n) CHECK_FALSE(decode_any(std::string_view(frame).substr(0, n)).empty());
    CHECK(decode_any(frame + "x") != "");  // trailing bytes
    // Past the checksum, the decoders themselves must refuse short bodies, naming the message and the field.
    const auto m = open_frame(frame);
    REQUIRE(m.ok());
    const std::string what = m->kind == MessageKind::hello     ? "hello"
                             : m->kind == MessageKind::request ? "request"
                             : m->kind == MessageKind::outcome ? "outcome"
                                                               : "failure";
    for (std::size_t n = 0; n < m->body.size(); ++n) {
      const std::string error = decode_body(m->kind, m->body.substr(0, n));
      INFO(what, " cut to ", n, " bytes: ", error);
      CHECK(error.starts_with(what + ": truncated in "));
    }
  }
  // The field that ran short, by name: a request cut inside its first header's content.
  const CompileRequest r = sample_request();
  const std::string frame = encode_request(r);
  const std::string_view body = open_frame(frame)->body;
  const std::size_t content = body.find("#pragma once");
  REQUIRE(content != std::string_view::npos);
  CHECK(decode_request(body.substr(0, content + 3)).error() == "request: truncated in header content");
}

TEST_CASE("a garbled count or size is refused with what it was, not read past") {
  // A request whose options count claims 2^32-1 strings: refused when the bytes run out, not reserved.
  const CompileRequest r = sample_request();
  const std::string frame = encode_request(r);
  std::string body(open_frame(frame)->body);
  const std::size_t options = 4 * 4 + r.registry.size() + r.unit.size() + r.source_name.size() + r.source.size();
  body.replace(options, 4, "\xff\xff\xff\xff");
  CHECK(decode_request(body).error().starts_with("request: truncated in options"));
  // A pch mode no encoder writes.
  body = std::string(open_frame(frame)->body);
  const std::size_t tail = 4 + r.pch_path.size() + 4 + r.pch_unpacked.size() + 4 + r.ptx.size() + 4 + 4 +
                           r.link_source.size() + 4 + r.link_source_name.size() + 1 + 4 + r.unit_lto_ir.size() + 4;
  body[body.size() - tail - 1] = 7;
  CHECK(decode_request(body).error() == "request: pch mode is 7, out of range");
}

TEST_CASE("a flipped bit anywhere in a frame is refused") {
  const std::string frame = encode_request(sample_request());
  for (std::size_t i = 0; i < frame.size(); ++i) {
    std::string damaged = frame;
    damaged[i] = static_cast<char>(damaged[i] ^ (1 << (i % 8)));
    INFO("byte ", i);
    CHECK_FALSE(decode_any(damaged).empty());
  }
}

TEST_CASE("garbage is refused without a crash or a huge allocation") {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 2000; ++round) {
    std::string bytes(rng() % 200, '\0');
    for (char& c : bytes) c = static_cast<char>(rng());
    if (round % 2 == 0 && bytes.size() >= kFrameHeaderSize) {
      // A valid magic and version, so the size and the checksum are what must refuse it.
      const std::string header = encode_hello({}).substr(0, 8);
      bytes.replace(0, 8, header);
    }
    CHECK_FALSE(decode_any(bytes).empty());
  }
  // A header claiming 2^40 bytes is refused before reading or allocating them.
  std::string huge = encode_hello({});
  const std::uint64_t size = std::uint64_t{1} << 40;
  std::memcpy(huge.data() + 8, &size, 8);
  CHECK(open_frame(huge).error().find("out of range") != std::string::npos);
  // Counts and lengths are checked against the bytes left, whatever the body claims.
  std::string body(4, '\xff');
  CHECK_FALSE(decode_request(body).ok());
  CHECK_FALSE(decode_outcome(std::string(1, '\1') + body).ok());
}

TEST_CASE("a flag byte other than 0 or 1 is refused: every message has one encoding") {
  // Found by fuzz_jit_frame: 0x43 read as true, and the message did not encode back to its bytes.
  const std::string failure_frame = encode_failure({true, 6, "nvrtc not found"});  // the message views into it
  const auto failure = open_frame(failure_frame);
  REQUIRE(failure.ok());
  std::string body(failure->body);
  body[0] = 2;  // the kiln-error flag
  CHECK(decode_failure(body).error().find("kiln error flag is 2, not 0 or 1") != std::string::npos);
  CompileOutcome ok;
  ok.entry = kiln::test::sample_entry(0);
  const std::string outcome_frame = encode_outcome(ok);
  const auto outcome = open_frame(outcome_frame);
  REQUIRE(outcome.ok());
  body = std::string(outcome->body);
  body[0] = '\x43';  // the ok flag
  CHECK(decode_outcome(body).error().find("ok is 67, not 0 or 1") != std::string::npos);
  // Whether a request's link source is LTO-IR: the byte before the unit's LTO-IR (u32 size, bytes) and
  // the code's arch (u32), the last fields.
  const CompileRequest sample = sample_request();
  const std::string request_frame = encode_request(sample);
  const auto request = open_frame(request_frame);
  REQUIRE(request.ok());
  body = std::string(request->body);
  body[body.size() - 4 - sample.unit_lto_ir.size() - 4 - 1] = 2;
  CHECK(decode_request(body).error().find("link source is LTO-IR is 2, not 0 or 1") != std::string::npos);
}

TEST_CASE("frames travel through a pipe; a stream cut short is an error, a clean end is end_of_stream") {
  int p[2];
  REQUIRE(::pipe(p) == 0);
  const std::string request = encode_request(sample_request());
  const std::string outcome = encode_outcome(sample_outcome());  // larger than a pipe's buffer
  std::thread writer([&] {
    CHECK(write_frame(p[1], request).status == IoStatus::ok);
    CHECK(write_frame(p[1], outcome).status == IoStatus::ok);
    CHECK(::write(p[1], request.data(), 10) == 10);  // a frame cut off inside its header
    ::close(p[1]);
  });
  const FrameRead first = read_frame(p[0]);
  const FrameRead second = read_frame(p[0]);
  const FrameRead cut = read_frame(p[0]);
  const FrameRead end = read_frame(p[0]);
  writer.join();
  ::close(p[0]);
  CHECK(first.status == IoStatus::ok);
  CHECK(first.frame == request);
  CHECK(second.status == IoStatus::ok);
  CHECK(second.frame == outcome);
  CHECK(cut.status == IoStatus::error);
  CHECK(cut.error.find("10 of 16 header bytes") != std::string::npos);
  CHECK(end.status == IoStatus::end_of_stream);

  // A bad header is refused as soon as it is read, before the claimed payload is waited for.
  REQUIRE(::pipe(p) == 0);
  CHECK(::write(p[1], "GARBAGE-GARBAGE-", 16) == 16);
  const FrameRead garbage = read_frame(p[0]);
  CHECK(garbage.status == IoStatus::error);
  CHECK(garbage.error.find("bad magic") != std::string::npos);
  ::close(p[0]);
  ::close(p[1]);
}

TEST_CASE("a silent non-blocking pipe is abandoned when keep_waiting says so") {
  int p[2];
  REQUIRE(::pipe2(p, O_NONBLOCK) == 0);
  int asked = 0;
  const FrameRead r = read_frame(p[0], [&] { return ++asked < 3; });
  CHECK(r.status == IoStatus::abandoned);
  CHECK(asked == 3);
  ::close(p[0]);
  ::close(p[1]);
}
