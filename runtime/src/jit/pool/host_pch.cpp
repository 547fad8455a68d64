// The pool host's unpacked PCH copies (jit/pool/host_pch.hpp).
#include "jit/pool/host_pch.hpp"

#include <sys/prctl.h>
#include <sys/stat.h>

#include <chrono>

namespace kiln::detail {

bool fds_openable_by_children() { return ::prctl(PR_GET_DUMPABLE) == 1; }

Result<HostPchCopies::Copy> HostPchCopies::get(const std::string& family, const std::filesystem::path& packed) {
  if (!fds_openable_by_children()) return Copy{};
  std::shared_ptr<Slot> slot;
  {
    const std::lock_guard lock(mutex_);
    std::shared_ptr<Slot>& s = slots_[family];
    if (!s) s = std::make_shared<Slot>();
    s->used = ++calls_;
    slot = s;
  }
  Copy copy;
  std::string failed;
  {
    const std::lock_guard making(slot->making);
    struct stat st {};
    const bool same = slot->pch && ::stat(packed.c_str(), &st) == 0 && slot->pch->same_file(st);
    if (!same) {
      slot->pch.reset();  // its memory back before the next is unpacked
      const auto start = std::chrono::steady_clock::now();
      // In this process: NVRTC does not run here, so the unpacking's threads and buffers move no heap
      // that matters (the workers' do: docs/DESIGN.md, "PCH files at rest").
      Result<UnpackedPch> made = UnpackedPch::open(packed, pch_threads(), UnpackIn::this_process);
      if (made) {
        slot->pch = std::make_shared<const UnpackedPch>(std::move(made).value());
        copy.unpack_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      } else {
        failed = made.error();
      }
    }
    copy.pch = slot->pch;
  }
  if (!failed.empty()) {
    drop(family);
    return fail(failed);
  }
  const std::lock_guard lock(mutex_);
  evict_beyond_most(family);
  return copy;
}

void HostPchCopies::evict_beyond_most(const std::string& keep) {
  while (slots_.size() > most_) {
    auto oldest = slots_.end();
    for (auto it = slots_.begin(); it != slots_.end(); ++it)
      if (it->first != keep && (oldest == slots_.end() || it->second->used < oldest->second->used)) oldest = it;
    if (oldest == slots_.end()) return;
    slots_.erase(oldest);  // a caller making or holding it keeps its own reference
  }
}

void HostPchCopies::drop(const std::string& family) {
  std::shared_ptr<Slot> gone;
  const std::lock_guard lock(mutex_);
  const auto it = slots_.find(family);
  if (it == slots_.end()) return;
  gone = std::move(it->second);
  slots_.erase(it);
}

void HostPchCopies::drop_all() {
  std::map<std::string, std::shared_ptr<Slot>> gone;
  const std::lock_guard lock(mutex_);
  gone.swap(slots_);
}

}  // namespace kiln::detail
