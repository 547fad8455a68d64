// The machine's compile budget: slot lock files in the cache directory (jit/pool/machine_slots.hpp).
#include "jit/pool/machine_slots.hpp"

#include "base/parse.hpp"
#include "base/private_dir.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

namespace kiln::detail {

namespace {

constexpr std::chrono::milliseconds kFirstPause{1};
constexpr std::chrono::milliseconds kLongestPause{50};
constexpr std::string_view kElsewhere = "point KILN_CACHE_DIR at a directory of your own";

}  // namespace

Result<unsigned> machine_slots_from(const char* value, unsigned fallback) {
  if (value == nullptr || *value == '\0') return fallback;
  if (const auto n = parse_count(value, 1, kMaxMachineSlots)) return static_cast<unsigned>(*n);
  else return fail("KILN_JIT_MACHINE_SLOTS=" + n.error() + "; using " + std::to_string(fallback) + " compile slots");
}

MachineSlots::MachineSlots(std::filesystem::path dir, unsigned slots)
    : dir_(std::move(dir)), slots_(std::max(1u, slots)), fds_(slots_, -1), held_(slots_, false) {}

MachineSlots::~MachineSlots() {
  for (const int fd : fds_)
    if (fd >= 0) ::close(fd);  // drops any lock still held
  if (dir_fd_ >= 0) ::close(dir_fd_);
}

std::string MachineSlots::problem() const {
  const std::lock_guard lock(mutex_);
  return problem_;
}

bool MachineSlots::try_take(unsigned& taken) {
  if (!opened_) {
    opened_ = true;
    // The cache directory is the disk cache's, vetted there; the slots' own is made and checked here.
    auto parent = open_private_dir(dir_, kElsewhere, true);
    if (!parent || !*parent) {
      problem_ = "no machine-wide compile budget: " + (parent ? dir_.string() + " is missing" : parent.error());
      return false;
    }
    auto slots = open_private_subdir(**parent, "jit-slots", kElsewhere, true);
    if (!slots || !*slots) {
      problem_ = "no machine-wide compile budget: " + (slots ? (dir_ / "jit-slots").string() + " is missing" : slots.error());
      return false;
    }
    dir_fd_ = (*slots)->fd.release();
  }
  if (dir_fd_ < 0) return false;
  for (unsigned i = 0; i < slots_; ++i) {
    const unsigned slot = (next_ + i) % slots_;
    if (held_[slot]) continue;
    if (fds_[slot] < 0) {
      const std::string name = "slot-" + std::to_string(slot) + ".lock";
      // No open can block (a FIFO planted there), and no symlink is followed.
      const int fd = ::openat(dir_fd_, name.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600);
      struct stat st {};
      if (fd < 0 || ::fstat(fd, &st) != 0 || !vet_private_file(st, dir_ / "jit-slots" / name)) {
        problem_ = "no machine-wide compile budget: cannot use " + (dir_ / "jit-slots" / name).string() +
                   (fd < 0 ? std::string(": ") + std::strerror(errno) : std::string(": not a private regular file"));
        if (fd >= 0) ::close(fd);
        ::close(dir_fd_);
        dir_fd_ = -1;
        return false;
      }
      fds_[slot] = fd;
    }
    if (::flock(fds_[slot], LOCK_EX | LOCK_NB) == 0) {
      held_[slot] = true;
      next_ = (slot + 1) % slots_;
      taken = slot;
      return true;
    }
  }
  return false;
}

MachineSlots::Held MachineSlots::acquire(std::chrono::milliseconds limit, const std::function<bool()>& keep_waiting) {
  if (dir_.empty()) return {};
  const auto deadline = std::chrono::steady_clock::now() + limit;
  std::chrono::milliseconds pause = kFirstPause;
  for (;;) {
    {
      const std::lock_guard lock(mutex_);
      unsigned slot = 0;
      if (try_take(slot)) return Held(this, slot);
      if (dir_fd_ < 0) return {};  // the directory cannot be used: problem_ says why
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline || (keep_waiting && !keep_waiting())) return {};
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(pause, deadline - now));
    pause = std::min(pause * 2, kLongestPause);
  }
}

void MachineSlots::give_back(unsigned slot) noexcept {
  const std::lock_guard lock(mutex_);
  if (slot < slots_ && held_[slot]) {
    ::flock(fds_[slot], LOCK_UN);
    held_[slot] = false;
  }
}

MachineSlots::Held::Held(Held&& other) noexcept
    : owner_(std::exchange(other.owner_, nullptr)), slot_(other.slot_) {}

MachineSlots::Held& MachineSlots::Held::operator=(Held&& other) noexcept {
  if (this != &other) {
    release();
    owner_ = std::exchange(other.owner_, nullptr);
    slot_ = other.slot_;
  }
  return *this;
}

void MachineSlots::Held::release() noexcept {
  if (owner_ != nullptr) std::exchange(owner_, nullptr)->give_back(slot_);
}

}  // namespace kiln::detail
