// A bounded set of shared values found by a hash and a comparison, forgetting the least recently used
// first: what kiln keeps per process of the programs given at run time (docs/DESIGN.md, "Programs given at
// run time"). Not thread-safe: its owner locks.
#pragma once

#include <cstddef>
#include <iterator>
#include <list>
#include <memory>
#include <unordered_map>
#include <utility>

namespace kiln::detail {

// `Item` has a `std::shared_ptr<...> value`: forgetting an item drops the set's share only, so a value
// someone else still holds stays valid for them; it is no longer found.
template <typename Item>
class Lru {
 public:
  // The first item of hash `hash` that `same(item)` accepts, now the most recently used; nullptr if none.
  template <typename Same>
  Item* find(std::size_t hash, Same&& same) {
    for (auto [it, end] = index_.equal_range(hash); it != end; ++it) {
      if (!same(it->second->item)) continue;
      order_.splice(order_.begin(), order_, it->second);
      return &it->second->item;
    }
    return nullptr;
  }

  // Adds `item` as the most recently used, then forgets items while more than `capacity` are kept (0: no
  // limit): the least recently used one nobody else holds, else the least recently used. The item added
  // is never forgotten by its own add.
  Item& add(std::size_t hash, Item item, std::size_t capacity) {
    order_.push_front({hash, std::move(item)});
    index_.emplace(hash, order_.begin());
    while (capacity > 0 && order_.size() > capacity) forget(victim());
    return order_.front().item;
  }

  std::size_t size() const noexcept { return order_.size(); }

 private:
  struct Slot {
    std::size_t hash;
    Item item;
  };
  using Iterator = typename std::list<Slot>::iterator;

  // The least recently used item only this set holds, else the least recently used; never the newest.
  Iterator victim() {
    for (auto it = std::prev(order_.end()); it != order_.begin(); --it)
      if (it->item.value.use_count() <= 1) return it;
    return std::prev(order_.end());
  }

  void forget(Iterator slot) {
    for (auto [it, end] = index_.equal_range(slot->hash); it != end; ++it) {
      if (it->second != slot) continue;
      index_.erase(it);
      break;
    }
    order_.erase(slot);
  }

  std::list<Slot> order_;  // most recently used first
  std::unordered_multimap<std::size_t, Iterator> index_;
};

}  // namespace kiln::detail
