// Which queued request a host thread of the JIT pool takes next, and the PCH-family facts that decide it.
#include "jit/pool/pool_state.hpp"

#include <algorithm>

namespace kiln::detail {

// Whether `s`'s worker can fork workers that hold `family`'s PCH.
bool JitPool::State::can_fork_for(const Slot& s, const std::string& family) const {
  return s.has_worker() && s.refused.count(family) == 0 && s.warm.count(family) > 0;
}

bool JitPool::State::zygote_exists(const std::string& family, const Slot* self) const {
  return std::any_of(slots.begin(), slots.end(),
                     [&](const auto& s) { return s.get() != self && can_fork_for(*s, family); });
}

// A worker started from the executable first: where linking starts a thread (the CUDA driver's), a
// forked worker has no zygote of the family it was forked for, and refuses.
Slot* JitPool::State::idle_zygote(const std::string& family, const Slot* self) const {
  Slot* found = nullptr;
  for (const auto& s : slots)
    if (s.get() != self && !s->busy && !s->lent && can_fork_for(*s, family) && (!found || (s->root && !found->root)))
      found = s.get();
  return found;
}

// Whether a worker that can fork for `family` is only forking or compiling warm, and so will be idle
// within about one warm compile; one that builds another family's PCH is not worth waiting for.
bool JitPool::State::zygote_soon_idle(const std::string& family, const Slot* self) const {
  return std::any_of(slots.begin(), slots.end(), [&](const auto& s) {
    return s.get() != self && can_fork_for(*s, family) && (s->lent || s->warming.empty());
  });
}

// Whether a thread other than `self` took a request of `family` to run on a worker it will fork:
// until it asks (fork_for), a worker that holds the family must stay idle for it too.
bool JitPool::State::fork_coming(const std::string& family, const Slot* self) const {
  return std::any_of(slots.begin(), slots.end(),
                     [&](const auto& s) { return s.get() != self && s->will_fork == family; });
}

bool JitPool::State::held_elsewhere(const std::string& family, const Slot* self) const {
  return std::any_of(slots.begin(), slots.end(),
                     [&](const auto& s) { return s.get() != self && s->has_worker() && s->warm.count(family) > 0; });
}

bool JitPool::State::warming_elsewhere(const std::string& family, const Slot* self) const {
  return std::any_of(slots.begin(), slots.end(),
                     [&](const auto& s) { return s.get() != self && s->warming == family; });
}

// Whether an idle thread other than `self` would take a request of `family` now and fork a worker
// for it: it has no worker, or one that holds neither `family` nor any family with queued requests
// or fork waiters (it would serve those first), and that no worker was forked from (it would keep
// that one and build the PCH itself).
bool JitPool::State::another_would_fork(const std::string& family, const Slot* self) const {
  return std::any_of(slots.begin(), slots.end(), [&](const auto& s) {
    if (s.get() == self || s->busy || s->lent) return false;
    if (!s->has_worker()) return true;
    if (s->children > 0 || s->warm.count(family) > 0) return false;
    return std::none_of(s->warm.begin(), s->warm.end(), [&](const std::string& held) {
      return fork_waiters.count(held) > 0 ||
             std::any_of(queue.begin(), queue.end(), [&](const Job& j) { return j.family == held; });
    });
  });
}

// The queued request `slot`'s thread should run next, or kNone to wait. Marks the slot as warming
// the family of a request whose PCH nobody holds or builds yet.
std::size_t JitPool::State::pick(Slot& slot) {
  if (slot.lent) return kNone;
  const bool lends = forking && slot.has_worker();
  // Threads wait to fork a worker from this one: stay idle for them.
  if (lends)
    for (const std::string& family : slot.warm)
      if ((fork_waiters.count(family) > 0 || fork_coming(family, &slot)) && slot.refused.count(family) == 0)
        return kNone;
  // Its own families first. But where another idle thread would fork a worker from this one for
  // the request, leave the request to it: it runs as soon, and one more worker is warm. (That thread
  // has no own requests to run, so it never leaves this one to this thread in turn.)
  if (slot.has_worker()) {
    for (std::size_t i = 0; i < queue.size(); ++i) {
      if (queue[i].family.empty() || slot.warm.count(queue[i].family) == 0) continue;
      if (lends && slot.refused.count(queue[i].family) == 0 && another_would_fork(queue[i].family, &slot))
        return kNone;
      return i;
    }
  }
  // Then the oldest request it can start now: one whose family some worker holds (forked), or whose
  // PCH nobody builds yet (this worker builds it). A family's other requests wait for its builder.
  for (std::size_t i = 0; i < queue.size(); ++i) {
    const std::string& family = queue[i].family;
    if (family.empty()) return i;
    if (zygote_exists(family, &slot)) {
      // It will fork a worker for it (fork_for): the worker it forks from must not take a request
      // meanwhile, or both could wait on each other (a request that waits for another one).
      if (!(slot.has_worker() && slot.warm.count(family) > 0)) slot.will_fork = family;
      return i;
    }
    // Waiting for the family's builder pays only while no worker holds the family: where one does
    // and still cannot fork for it (it refused: it runs threads), the builder will not fork either, and
    // a request left waiting behind it waits for a whole compile (or for ever, behind a request that
    // waits on this one).
    if (!warming_elsewhere(family, &slot) || held_elsewhere(family, &slot)) {
      slot.warming = family;
      return i;
    }
  }
  return kNone;
}

}  // namespace kiln::detail
