// Who holds a lock file, as the holder writes it once it has the lock, and what that process is doing:
// the build lock (disk/lock.cpp) and the compile slots (jit/pool/machine_slots.cpp) both skip a holder
// that is stopped rather than wait on it, and tell a dead one's inherited lock from a live holder.
#pragma once

#include <sys/types.h>

#include <optional>

namespace kiln::detail {

// The state of process `pid` as /proc says: its start time (clock ticks since boot) and whether it is
// stopped; nullopt when it is gone (or a zombie).
struct ProcessState {
  unsigned long long start_time = 0;
  bool stopped = false;
};
std::optional<ProcessState> process_state(pid_t pid);

// Writes "<pid> <start time>\n" of this process into the lock file `fd` (which it holds), replacing what
// was there. Best effort: a holder that cannot say who it is is waited for as one that is running.
void record_holder(int fd);

// The holder a lock file names, if it names one yet (the holder writes it just after locking).
struct LockHolder {
  pid_t pid = 0;
  unsigned long long start_time = 0;
};
std::optional<LockHolder> read_holder(int fd);

// unknown: the file names nobody (yet). gone: that process is dead, or its pid is another process's now.
enum class HolderIs { unknown, running, stopped, gone };
HolderIs holder_is(const std::optional<LockHolder>& holder);

}  // namespace kiln::detail
