// LeaseRegistry: per key, a list of values that are lent to one holder at a time. A lease takes
// the first value of its key that nobody holds and makes a new one only when all are held, so a
// holder that returns its value and leases again gets the same one back. Every lease keeps the
// registry alive, so a lease may outlive the code that created the registry (a static one
// destroyed at exit before an engine that still holds a lease). Thread-safe.
//
// CaptureStream leases CUDA streams from one (a device's capture streams); the registry itself
// knows nothing of CUDA, so its rules are tested on any machine.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <type_traits>
#include <utility>
#include <vector>

namespace shardscope {

template <typename Key, typename Value>
class LeaseRegistry : public std::enable_shared_from_this<LeaseRegistry<Key, Value>> {
 public:
  using Make = std::function<Value(const Key&)>;

  // One value held: returned to the registry when the lease is destroyed. Movable, not copyable.
  class Lease {
   public:
    Lease(Lease&& other) noexcept(
        std::is_nothrow_move_constructible_v<Key>&& std::is_nothrow_move_constructible_v<Value>)
        : registry_(std::move(other.registry_)),
          key_(std::move(other.key_)),
          index_(other.index_),
          value_(std::move(other.value_)) {}
    Lease& operator=(Lease&&) = delete;
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease() {
      if (registry_) registry_->giveBack(key_, index_);
    }

    const Value& value() const { return value_; }
    // Which of its key's values this is (0 for the first made).
    size_t index() const { return index_; }

   private:
    friend class LeaseRegistry;
    Lease(std::shared_ptr<LeaseRegistry> registry, Key key, size_t index, Value value)
        : registry_(std::move(registry)),
          key_(std::move(key)),
          index_(index),
          value_(std::move(value)) {}

    std::shared_ptr<LeaseRegistry> registry_;  // null once moved from
    Key key_;
    size_t index_;
    Value value_;
  };

  // A registry that makes each key's values with `make` (called under the registry's lock).
  // Registries live in shared_ptrs only (leases share them): hence create().
  static std::shared_ptr<LeaseRegistry> create(Make make) {
    return std::make_shared<LeaseRegistry>(Private{}, std::move(make));
  }
  class Private {  // only create() can make one, so only create() can construct a registry
    friend class LeaseRegistry;
    explicit Private() = default;
  };
  LeaseRegistry(Private, Make make) : make_(std::move(make)) {}

  Lease lease(const Key& key) {
    std::lock_guard lock(mutex_);
    std::vector<Slot>& slots = slots_[key];
    size_t i = 0;
    while (i < slots.size() && slots[i].held) ++i;
    if (i == slots.size()) slots.push_back({make_(key), false});
    Lease lease(this->shared_from_this(), key, i, slots[i].value);  // may throw: nothing held yet
    slots[i].held = true;
    return lease;
  }

  // How many values `key` has (held or not): for tests.
  size_t size(const Key& key) const {
    std::lock_guard lock(mutex_);
    const auto it = slots_.find(key);
    return it == slots_.end() ? 0 : it->second.size();
  }

 private:
  struct Slot {
    Value value;
    bool held;
  };

  void giveBack(const Key& key, size_t index) {
    std::lock_guard lock(mutex_);
    slots_.at(key).at(index).held = false;
  }

  Make make_;
  mutable std::mutex mutex_;
  std::map<Key, std::vector<Slot>> slots_;
};

}  // namespace shardscope
