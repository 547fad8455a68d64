// The machine's compile budget: slot lock files in the cache directory (jit/pool/machine_slots.hpp).
#include "jit/pool/machine_slots.hpp"

#include "base/lock_holder.hpp"
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
    : dir_(std::move(dir)),
      slots_(std::max(1u, slots)),
      fds_(slots_, -1),
      held_(slots_, false),
      standin_fds_(slots_, -1),
      standin_held_(slots_, false) {}

MachineSlots::~MachineSlots() {
  for (const auto* fds : {&fds_, &standin_fds_})
    for (const int fd : *fds)
      if (fd >= 0) ::close(fd);  // drops any lock still held
  if (dir_fd_ >= 0) ::close(dir_fd_);
}

std::string MachineSlots::problem() const {
  const std::lock_guard lock(mutex_);
  return problem_;
}

int MachineSlots::open_file(const std::string& name) {
  // No open can block (a FIFO planted there), and no symlink is followed.
  const int fd = ::openat(dir_fd_, name.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600);
  struct stat st {};
  if (fd >= 0 && ::fstat(fd, &st) == 0 && vet_private_file(st, dir_ / "jit-slots" / name)) return fd;
  problem_ = "no machine-wide compile budget: cannot use " + (dir_ / "jit-slots" / name).string() +
             (fd < 0 ? std::string(": ") + std::strerror(errno) : std::string(": not a private regular file"));
  if (fd >= 0) ::close(fd);
  ::close(dir_fd_);
  dir_fd_ = -1;
  return -1;
}

bool MachineSlots::try_take(unsigned& taken, bool& standin) {
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
    if (fds_[slot] < 0 && (fds_[slot] = open_file("slot-" + std::to_string(slot) + ".lock")) < 0) return false;
    if (::flock(fds_[slot], LOCK_EX | LOCK_NB) == 0) {
      record_holder(fds_[slot]);  // so that a waiter can tell when this process is stopped
      held_[slot] = true;
      next_ = (slot + 1) % slots_;
      taken = slot;
      standin = false;
      return true;
    }
  }
  // Every slot is held. One whose holder is stopped (SIGSTOP, Ctrl-Z, a debugger) compiles nothing until
  // it is continued: one waiter compiles in its stead, under the slot's stand-in lock, so that the
  // machine still runs at most N compiles at once.
  std::vector<std::pair<pid_t, bool>> stopped;  // per holder asked about: one process often holds several
  const auto is_stopped = [&](const std::optional<LockHolder>& holder) {
    if (!holder) return false;
    for (const auto& [pid, is] : stopped)
      if (pid == holder->pid) return is;
    return stopped.emplace_back(holder->pid, holder_is(holder) == HolderIs::stopped).second;
  };
  for (unsigned slot = 0; slot < slots_; ++slot) {
    if (held_[slot] || standin_held_[slot] || !is_stopped(read_holder(fds_[slot]))) continue;
    if (standin_fds_[slot] < 0 &&
        (standin_fds_[slot] = open_file("slot-" + std::to_string(slot) + ".standin.lock")) < 0)
      return false;
    if (::flock(standin_fds_[slot], LOCK_EX | LOCK_NB) == 0) {
      standin_held_[slot] = true;
      taken = slot;
      standin = true;
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
      bool standin = false;
      if (try_take(slot, standin)) return Held(this, slot, standin);
      if (dir_fd_ < 0) return {};  // the directory cannot be used: problem_ says why
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline || (keep_waiting && !keep_waiting())) return {};
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(pause, deadline - now));
    pause = std::min(pause * 2, kLongestPause);
  }
}

void MachineSlots::give_back(unsigned slot, bool standin) noexcept {
  const std::lock_guard lock(mutex_);
  if (slot >= slots_) return;
  if (standin && standin_held_[slot]) {
    ::flock(standin_fds_[slot], LOCK_UN);
    standin_held_[slot] = false;
  } else if (!standin && held_[slot]) {
    // Emptied first: a waiter that reads the file before the next holder writes it finds nobody named,
    // never this process (which may be stopped later, holding nothing).
    (void)!::ftruncate(fds_[slot], 0);
    ::flock(fds_[slot], LOCK_UN);
    held_[slot] = false;
  }
}

MachineSlots::Held::Held(Held&& other) noexcept
    : owner_(std::exchange(other.owner_, nullptr)), slot_(other.slot_), standin_(other.standin_) {}

MachineSlots::Held& MachineSlots::Held::operator=(Held&& other) noexcept {
  if (this != &other) {
    release();
    owner_ = std::exchange(other.owner_, nullptr);
    slot_ = other.slot_;
    standin_ = other.standin_;
  }
  return *this;
}

void MachineSlots::Held::release() noexcept {
  if (owner_ != nullptr) std::exchange(owner_, nullptr)->give_back(slot_, standin_);
}

}  // namespace kiln::detail
