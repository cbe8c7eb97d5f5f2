// WeakSet: objects noted while a script runs, held weakly, so that noting one never keeps it
// alive; each is listed once. Expired entries are dropped whenever the set doubles, so a helper
// called a million times whose objects go with its calls leaves the set as long as what is alive.
#pragma once

#include <algorithm>
#include <iterator>
#include <memory>
#include <unordered_map>
#include <vector>

namespace shardscope::trace {

template <typename T>
class WeakSet {
 public:
  void insert(const std::shared_ptr<T>& p) {
    if (!p) return;
    auto& entry = entries_[p.get()];
    // An address reused after its object went: the entry is expired, and is this object's now.
    if (!entry.expired()) return;
    entry = p;
    if (entries_.size() >= std::max<size_t>(64, 2 * kept_)) dropExpired();
  }

  // The objects still alive.
  std::vector<std::shared_ptr<T>> live() const {
    std::vector<std::shared_ptr<T>> out;
    for (const auto& [address, w] : entries_) {
      if (auto p = w.lock()) out.push_back(std::move(p));
    }
    return out;
  }

 private:
  void dropExpired() {
    for (auto it = entries_.begin(); it != entries_.end();)  // (C++17: the fuzz build's clang)
      it = it->second.expired() ? entries_.erase(it) : std::next(it);
    kept_ = entries_.size();
  }

  std::unordered_map<const T*, std::weak_ptr<T>> entries_;
  size_t kept_ = 0;
};

}  // namespace shardscope::trace
