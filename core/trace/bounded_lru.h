// BoundedLru: a thread-safe least-recently-used map bounded by entry count and by a byte size the
// caller states per entry. Used for what repeats from trace to trace (parsed programs, tokenized
// prompts); a value too large for the bound is simply not kept.
#pragma once

#include <cstddef>
#include <functional>
#include <list>
#include <mutex>
#include <optional>
#include <utility>

namespace shardscope::trace {

template <class Key, class Value>
class BoundedLru {
 public:
  BoundedLru(size_t maxEntries, size_t maxBytes) : maxEntries_(maxEntries), maxBytes_(maxBytes) {}

  // The value whose key `matches`, made the most recent; nullopt when none.
  std::optional<Value> find(const std::function<bool(const Key&)>& matches) {
    std::lock_guard lock(mutex_);
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (!matches(it->key)) continue;
      entries_.splice(entries_.begin(), entries_, it);
      return entries_.front().value;
    }
    return std::nullopt;
  }

  // Keeps `value` as the most recent, dropping the least recent entries (and those `stale` says
  // are no longer useful) until both bounds hold.
  void put(Key key, Value value, size_t bytes,
           const std::function<bool(const Key&)>& stale = nullptr) {
    if (bytes > maxBytes_ || maxEntries_ == 0) return;
    std::lock_guard lock(mutex_);
    if (stale) {
      for (auto it = entries_.begin(); it != entries_.end();) {
        if (!stale(it->key)) {
          ++it;
          continue;
        }
        bytes_ -= it->bytes;
        it = entries_.erase(it);
      }
    }
    entries_.push_front({std::move(key), std::move(value), bytes});
    bytes_ += bytes;
    while (entries_.size() > maxEntries_ || bytes_ > maxBytes_) {
      bytes_ -= entries_.back().bytes;
      entries_.pop_back();
    }
  }

  size_t size() const {
    std::lock_guard lock(mutex_);
    return entries_.size();
  }

 private:
  struct Entry {
    Key key;
    Value value;
    size_t bytes;
  };
  mutable std::mutex mutex_;
  std::list<Entry> entries_;  // most recent first
  size_t maxEntries_, maxBytes_, bytes_ = 0;
};

}  // namespace shardscope::trace
