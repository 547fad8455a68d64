// Packing NVRTC's PCH files into zstd frames and unpacking them into memory (jit/pch_pack.hpp).
#include "jit/pch_pack.hpp"

#include "base/thread_start.hpp"

#include <zstd.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

namespace kiln::detail {

namespace {

std::string errno_text(const std::string& what) { return what + ": " + std::strerror(errno); }

// A file descriptor, closed on every path out.
class Fd {
 public:
  explicit Fd(int fd = -1) noexcept : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const noexcept { return fd_; }
  int release() noexcept { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

// A mapping, unmapped on every path out.
class Mapping {
 public:
  Mapping(void* base, std::size_t size) noexcept : base_(base == MAP_FAILED ? nullptr : base), size_(size) {}
  ~Mapping() {
    if (base_ != nullptr) ::munmap(base_, size_);
  }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  char* data() const noexcept { return static_cast<char*>(base_); }
  explicit operator bool() const noexcept { return base_ != nullptr; }

 private:
  void* base_;
  std::size_t size_;
};

// Runs `work(i, slot)` for i in [0, count) on up to `threads` threads (this one among them), `slot`
// numbering the thread (0 for this one, below `threads`); the first failure is kept.
template <class Work>
Status parallel(std::size_t count, unsigned threads, Work work) {
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::string error;
  std::atomic_flag error_taken = ATOMIC_FLAG_INIT;
  const auto run = [&](unsigned slot) {
    for (std::size_t i = next++; i < count && !failed; i = next++) {
      if (Status s = work(i, slot); !s) {
        if (!error_taken.test_and_set()) error = s.error();
        failed = true;
      }
    }
  };
  std::vector<std::thread> helpers;
  const std::size_t extra = std::min<std::size_t>(threads == 0 ? 0 : threads - 1, count == 0 ? 0 : count - 1);
  for (std::size_t t = 0; t < extra; ++t) {
    Result<std::thread> helper = start_thread([&run, t] { run(static_cast<unsigned>(t + 1)); });
    if (!helper) break;  // no thread to be had: the others, and this one, do the work
    helpers.push_back(std::move(helper).value());
  }
  run(0);
  for (std::thread& t : helpers) t.join();
  if (failed) return fail(error);
  return ok();
}

std::string zstd_error(std::size_t code) { return std::string("zstd: ") + ZSTD_getErrorName(code); }

// Runs `work` in a child process (fork) and returns what it said. NVRTC accepts a PCH only in a process
// whose heap lies where the writer's did (docs/DESIGN.md, "PCH across processes"): threads, their malloc
// arenas and stacks, and the buffers of packing or unpacking would stay mapped in the worker and move
// NVRTC's next allocations (measured: a PCH unpacked in the worker itself was refused, "incompatible
// precompiled header"). A child's mappings go with it.
Status run_in_child(const std::function<Status()>& work) {
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return fail(errno_text("pipe"));
  const pid_t pid = ::fork();
  if (pid < 0) {
    const std::string why = errno_text("fork");
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
    return fail(why);
  }
  if (pid == 0) {
    ::close(pipe_fds[0]);
    Status done = fail("failed");
    try {
      done = work();
    } catch (const std::exception& e) {
      done = fail(e.what());
    }
    const std::string said = done ? std::string() : done.error();
    for (std::size_t at = 0; at < said.size();) {
      const ssize_t n = ::write(pipe_fds[1], said.data() + at, said.size() - at);
      if (n <= 0) break;
      at += static_cast<std::size_t>(n);
    }
    ::_exit(done ? 0 : 1);
  }
  ::close(pipe_fds[1]);
  std::string said;
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::read(pipe_fds[0], buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (said.size() < 64 * 1024) said.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(pipe_fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return ok();
  if (!said.empty()) return fail(said);
  return fail(WIFSIGNALED(status) ? "the child died of signal " + std::to_string(WTERMSIG(status))
                                  : "the child exited " + std::to_string(WEXITSTATUS(status)));
}

Status write_all(int fd, const char* data, std::size_t size, const std::string& name) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return fail(errno_text("writing " + name));
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  return ok();
}

// One frame of a packed file: where its bytes lie, and where its content goes.
struct Frame {
  std::size_t offset = 0, size = 0;
  std::uint64_t content_offset = 0, content_size = 0;
};

}  // namespace

unsigned pch_threads() { return std::clamp(std::thread::hardware_concurrency(), 1u, 16u); }

namespace {

Status pack_here(const std::filesystem::path& raw, const std::filesystem::path& packed, unsigned threads) {
  const Fd in(::open(raw.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (in.get() < 0) return fail(errno_text("opening " + raw.string()));
  struct stat st {};
  if (::fstat(in.get(), &st) != 0) return fail(errno_text("reading " + raw.string()));
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (size == 0 || size > kMaxPchBytes) return fail(raw.string() + " is " + std::to_string(size) + " bytes");
  const Mapping source(::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, in.get(), 0), size);
  if (!source) return fail(errno_text("mapping " + raw.string()));
  const std::size_t count = (size + kPchFrameBytes - 1) / kPchFrameBytes;
  std::vector<std::string> frames(count);
  const Status compressed = parallel(count, threads, [&](std::size_t i, unsigned) -> Status {
    const std::size_t begin = i * kPchFrameBytes, length = std::min<std::uint64_t>(kPchFrameBytes, size - begin);
    const std::unique_ptr<ZSTD_CCtx, decltype(&ZSTD_freeCCtx)> cctx(ZSTD_createCCtx(), &ZSTD_freeCCtx);
    if (!cctx) return fail("zstd: no compression context");
    // Level 1: within 2 % of level 3's size on a PCH, twice as fast, and the compile that builds a
    // family's PCH waits for it.
    ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_compressionLevel, 1);
    ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_checksumFlag, 1);
    ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_contentSizeFlag, 1);
    std::string& frame = frames[i];
    frame.resize(ZSTD_compressBound(length));
    const std::size_t n = ZSTD_compress2(cctx.get(), frame.data(), frame.size(), source.data() + begin, length);
    if (ZSTD_isError(n)) return fail(zstd_error(n));
    frame.resize(n);
    return ok();
  });
  if (!compressed) return fail("packing " + raw.string() + ": " + compressed.error());
  // 0600 whatever the umask, as every file of the cache; O_EXCL: a temp name of this writer's own.
  const Fd out(::open(packed.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (out.get() < 0) return fail(errno_text("creating " + packed.string()));
  for (const std::string& frame : frames) {
    if (Status w = write_all(out.get(), frame.data(), frame.size(), packed.string()); !w) {
      ::unlink(packed.c_str());
      return w;
    }
  }
  return ok();
}

}  // namespace

Status pack_pch(const std::filesystem::path& raw, const std::filesystem::path& packed, unsigned threads) {
  return run_in_child([&] { return pack_here(raw, packed, threads); });
}

UnpackedPch::~UnpackedPch() {
  if (fd_ >= 0) ::close(fd_);
}

UnpackedPch::UnpackedPch(UnpackedPch&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), bytes_(other.bytes_), dev_(other.dev_), ino_(other.ino_) {}

UnpackedPch& UnpackedPch::operator=(UnpackedPch&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    bytes_ = other.bytes_;
    dev_ = other.dev_;
    ino_ = other.ino_;
  }
  return *this;
}

std::string UnpackedPch::path() const { return "/proc/self/fd/" + std::to_string(fd_); }

std::string UnpackedPch::shared_path() const {
  return "/proc/" + std::to_string(::getpid()) + "/fd/" + std::to_string(fd_);
}

bool UnpackedPch::same_file(const struct stat& packed) const noexcept {
  return fd_ >= 0 && packed.st_dev == dev_ && packed.st_ino == ino_;
}

namespace {

// MADV_POPULATE_WRITE (Linux 5.14), which glibc's headers before 2.35 do not name.
constexpr int kMadvPopulateWrite = 23;

// The packed file at `packed` unpacked into the memory file `fd`, on up to `threads` threads.
Status unpack_into(const std::filesystem::path& packed, int fd, unsigned threads, UnpackFill fill) {
  const std::string name = packed.string();
  const Fd in(::open(packed.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  if (in.get() < 0) return fail(errno_text("opening " + name));
  struct stat st {};
  if (::fstat(in.get(), &st) != 0) return fail(errno_text("reading " + name));
  if (!S_ISREG(st.st_mode)) return fail(name + " is not a regular file");
  const auto size = static_cast<std::size_t>(st.st_size);
  // A packed file is at most its content's bound (zstd never grows data by more than 1/256 and a header).
  if (size == 0 || st.st_size < 0 || static_cast<std::uint64_t>(st.st_size) > ZSTD_compressBound(kMaxPchBytes))
    return fail(name + " is " + std::to_string(st.st_size) + " bytes");
  const Mapping source(::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, in.get(), 0), size);
  if (!source) return fail(errno_text("mapping " + name));

  // The frames, each checked before anything is allocated for its content.
  std::vector<Frame> frames;
  std::uint64_t total = 0;
  for (std::size_t at = 0; at < size;) {
    Frame f;
    f.offset = at;
    f.size = ZSTD_findFrameCompressedSize(source.data() + at, size - at);
    if (ZSTD_isError(f.size)) return fail(name + " at byte " + std::to_string(at) + ": " + zstd_error(f.size));
    const unsigned long long content = ZSTD_getFrameContentSize(source.data() + at, f.size);
    if (content == ZSTD_CONTENTSIZE_UNKNOWN || content == ZSTD_CONTENTSIZE_ERROR || content > kPchFrameBytes)
      return fail(name + " at byte " + std::to_string(at) + ": not a frame of a packed PCH");
    f.content_offset = total;
    f.content_size = content;
    total += content;
    if (total > kMaxPchBytes) return fail(name + " holds more than " + std::to_string(kMaxPchBytes) + " bytes");
    frames.push_back(f);
    at += f.size;
  }

  if (total == 0) return fail(name + " holds nothing");

  threads = std::max(threads, 1u);
  std::vector<std::unique_ptr<ZSTD_DCtx, decltype(&ZSTD_freeDCtx)>> contexts;
  for (unsigned t = 0; t < threads; ++t) contexts.emplace_back(nullptr, &ZSTD_freeDCtx);
  const auto decompress = [&](unsigned slot, const Frame& f, char* into) -> Status {
    auto& dctx = contexts[slot];
    if (!dctx) dctx.reset(ZSTD_createDCtx());
    if (!dctx) return fail("zstd: no decompression context");
    const std::size_t n = ZSTD_decompressDCtx(dctx.get(), into, f.content_size, source.data() + f.offset, f.size);
    if (ZSTD_isError(n)) return fail(zstd_error(n));
    if (n != f.content_size) return fail("a frame's content is shorter than its header says");
    return ok();
  };

  // Each frame is decompressed straight into a shared mapping of the memory file, on the thread that
  // first makes its pages (MADV_POPULATE_WRITE): a memory file that runs out of room fails that call with
  // ENOMEM instead of raising SIGBUS at a write into the mapping, and the pages are made on every thread
  // at once. Written with pwrite instead, the file's pages are made under its lock, one writer at a time
  // (jit/pch_pack.hpp, UnpackFill, says which is the faster where).
  if (fill == UnpackFill::automatic) fill = threads >= 8 ? UnpackFill::mapped : UnpackFill::pwrite;
  if (fill == UnpackFill::mapped) {
    if (::ftruncate(fd, static_cast<off_t>(total)) != 0) return fail(errno_text("unpacking " + name + ": sizing its memory file"));
    Mapping target(::mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0), total);
    if (!target) return fail(errno_text("unpacking " + name + ": mapping its memory file"));
    const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    std::atomic<bool> populate_missing{false};
    const Status unpacked = parallel(frames.size(), threads, [&](std::size_t i, unsigned slot) -> Status {
      const Frame& f = frames[i];
      char* into = target.data() + f.content_offset;
      // From the page the frame starts in (frames of other writers need not be page-sized).
      const std::size_t lead = f.content_offset % page;
      if (::madvise(into - lead, f.content_size + lead, kMadvPopulateWrite) != 0) {
        if (errno == EINVAL) populate_missing = true;  // a kernel before Linux 5.14: pwrite below
        return fail(errno_text("making " + std::to_string(f.content_size) + " bytes of memory"));
      }
      return decompress(slot, f, into);
    });
    if (unpacked) return ok();
    if (!populate_missing) return fail("unpacking " + name + ": " + unpacked.error());
    if (::ftruncate(fd, 0) != 0) return fail(errno_text("unpacking " + name + ": emptying its memory file"));
  }

  std::vector<std::string> buffers(threads);
  const Status unpacked = parallel(frames.size(), threads, [&](std::size_t i, unsigned slot) -> Status {
    const Frame& f = frames[i];
    std::string& buffer = buffers[slot];
    buffer.resize(f.content_size);
    if (Status d = decompress(slot, f, buffer.data()); !d) return d;
    const std::size_t n = f.content_size;
    for (std::size_t done = 0; done < n;) {
      const ssize_t w = ::pwrite(fd, buffer.data() + done, n - done, static_cast<off_t>(f.content_offset + done));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return fail(errno_text("writing " + std::to_string(n) + " bytes into memory"));
      done += static_cast<std::size_t>(w);
    }
    return ok();
  });
  if (!unpacked) return fail("unpacking " + name + ": " + unpacked.error());
  return ok();
}

}  // namespace

Result<UnpackedPch> UnpackedPch::open(const std::filesystem::path& packed, unsigned threads, UnpackIn where,
                                      UnpackFill fill) {
  struct stat st {};
  if (::stat(packed.c_str(), &st) != 0) return fail(errno_text("opening " + packed.string()));
  UnpackedPch pch;
  pch.fd_ = ::memfd_create("kiln-pch", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (pch.fd_ < 0) return fail(errno_text("unpacking " + packed.string() + ": memfd_create"));
  pch.dev_ = st.st_dev;
  pch.ino_ = st.st_ino;
  const int fd = pch.fd_;
  const Status unpacked = where == UnpackIn::child ? run_in_child([&] { return unpack_into(packed, fd, threads, fill); })
                                                   : unpack_into(packed, fd, threads, fill);
  if (!unpacked) return fail(unpacked.error());
  // Workers open the host's copy by path, read-write if they ask: sealed, none of them can change what
  // the others read. Its filling mapping is gone by now, so the seal takes.
  if (::fcntl(pch.fd_, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) != 0)
    return fail(errno_text("unpacking " + packed.string() + ": sealing its memory file"));
  struct stat content {};
  if (::fstat(pch.fd_, &content) != 0) return fail(errno_text("unpacking " + packed.string()));
  pch.bytes_ = static_cast<std::uint64_t>(content.st_size);
  return pch;
}

Result<UnpackedPch> UnpackedPch::open_unpacked(const std::string& unpacked, const std::filesystem::path& packed) {
  struct stat st {};
  if (::stat(packed.c_str(), &st) != 0) return fail(errno_text("opening " + packed.string()));
  UnpackedPch pch;
  // O_NONBLOCK: a path that names a FIFO must not block the worker (it is refused below).
  pch.fd_ = ::open(unpacked.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (pch.fd_ < 0) return fail(errno_text("opening " + unpacked));
  struct stat content {};
  if (::fstat(pch.fd_, &content) != 0) return fail(errno_text("reading " + unpacked));
  if (!S_ISREG(content.st_mode)) return fail(unpacked + " is not a regular file");
  if (content.st_size <= 0 || static_cast<std::uint64_t>(content.st_size) > kMaxPchBytes)
    return fail(unpacked + " is " + std::to_string(content.st_size) + " bytes");
  pch.dev_ = st.st_dev;
  pch.ino_ = st.st_ino;
  pch.bytes_ = static_cast<std::uint64_t>(content.st_size);
  return pch;
}

}  // namespace kiln::detail
