// The machine's compile budget, shared by every process of one cache directory: N slot lock files, a
// compile holding one, so that one process per GPU does not run processes x workers compilers at once
// (docs/DESIGN.md, "A machine-wide compile budget").
#pragma once

#include "base/result.hpp"

#include <chrono>
#include <filesystem>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace kiln::detail {

// KILN_JIT_MACHINE_SLOTS's meaning: a whole number from 1 to kMaxMachineSlots; unset or empty gives
// `fallback`. Anything else fails with the warning to print.
inline constexpr unsigned kMaxMachineSlots = 4096;
Result<unsigned> machine_slots_from(const char* value, unsigned fallback);

// The slots live in `<dir>/jit-slots/slot-<i>.lock`, made on first use (0700 and 0600, under the cache's
// private-directory rule) and never deleted: a slot is held by an exclusive flock of its file, which the
// kernel drops when its holder exits, however it exits. A process keeps one descriptor per slot and knows
// which of them its own threads hold, so two of its threads never share a lock. The holder writes its pid
// and start time into the file (base/lock_holder.hpp): a slot whose holder is stopped is lent to one
// waiter at a time, by the flock of `slot-<i>.standin.lock`.
class MachineSlots {
 public:
  // `dir` empty: no budget; every acquire holds nothing and returns at once.
  MachineSlots(std::filesystem::path dir, unsigned slots);
  ~MachineSlots();
  MachineSlots(const MachineSlots&) = delete;
  MachineSlots& operator=(const MachineSlots&) = delete;

  // A slot held, released on destruction (or release()).
  class Held {
   public:
    Held() = default;
    Held(Held&& other) noexcept;
    Held& operator=(Held&& other) noexcept;
    ~Held() { release(); }
    bool holds() const noexcept { return owner_ != nullptr; }
    void release() noexcept;

   private:
    friend class MachineSlots;
    Held(MachineSlots* owner, unsigned slot, bool standin) : owner_(owner), slot_(slot), standin_(standin) {}
    MachineSlots* owner_ = nullptr;
    unsigned slot_ = 0;
    bool standin_ = false;  // the stand-in lock of a slot whose holder is stopped
  };

  // A free slot, waited for by polling every slot with a growing pause (1 ms, doubling to 50 ms), at most
  // `limit`, and only while `keep_waiting` says so; or, when every slot is held, the stand-in of one whose
  // holder is stopped (SIGSTOP, Ctrl-Z, a debugger), which compiles nothing meanwhile. Holds nothing when the wait ran out (the caller
  // compiles beyond the budget rather than wait longer: no wait is unbounded), when there is no budget, or
  // when the directory cannot be used (problem() says why).
  Held acquire(std::chrono::milliseconds limit, const std::function<bool()>& keep_waiting = {});

  unsigned size() const noexcept { return slots_; }
  bool on() const noexcept { return !dir_.empty(); }
  // Why the slots could not be used (said once by the pool); empty while they can.
  std::string problem() const;

 private:
  bool try_take(unsigned& taken, bool& standin);  // under mutex_
  int open_file(const std::string& name);          // under mutex_; -1 (and problem_ said) when it cannot be used
  void give_back(unsigned slot, bool standin) noexcept;

  std::filesystem::path dir_;
  unsigned slots_;
  mutable std::mutex mutex_;
  bool opened_ = false;      // the directory was looked at
  std::string problem_;      // why it cannot be used
  int dir_fd_ = -1;
  std::vector<int> fds_;     // per slot, -1 until opened
  std::vector<bool> held_;   // by a thread of this process
  std::vector<int> standin_fds_;    // per slot, -1 until a stopped holder's slot was lent here
  std::vector<bool> standin_held_;  // by a thread of this process
  unsigned next_ = 0;        // where the next sweep starts, so that a process's threads spread over the slots
};

}  // namespace kiln::detail
