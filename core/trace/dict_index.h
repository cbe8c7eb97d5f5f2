// DictIndex: a dict's entries by key hash, so that a lookup in a large dict (a vocabulary's
// tokens, one per key) does not compare the key with every entry. A dict is a vector of entries
// in insertion order; the index is built by the first lookup of a dict past a few entries, extended
// as entries are appended, and checked before each use rather than told of every edit: the dict's
// count of key edits (Object::keyEdits, one an entry added, at least one a removal) must have grown
// by exactly the entries appended since, so that any removal is seen; and the entries it covers
// must still end with the key it last saw (held weakly: no cycle through it, and a freed key's
// address cannot pass for it). Otherwise the index is built again.
#pragma once

#include <cstddef>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

namespace shardscope::trace {

struct Object;
using Value = std::shared_ptr<Object>;

class DictIndex {
 public:
  DictIndex() = default;
  DictIndex(const DictIndex&) {}  // a copy's entries are other objects: it builds its own
  DictIndex(DictIndex&&) = default;
  DictIndex& operator=(const DictIndex&) {
    positions_.reset();
    return *this;
  }
  DictIndex& operator=(DictIndex&&) = default;

  // The position of the entry whose key `same` accepts among those whose key hashes to `hash`, or
  // entries.size(). `edits` is the dict's Object::keyEdits; `hashOf` hashes a key as `hash` was
  // made.
  template <class Same, class Hash>
  size_t find(const std::vector<std::pair<Value, Value>>& entries, unsigned edits, size_t hash,
              Same&& same, Hash&& hashOf) {
    if (!current(entries, edits)) {
      positions_ = std::make_unique<std::unordered_multimap<size_t, size_t>>();
      covered_ = 0;
    }
    for (; covered_ < entries.size(); ++covered_)
      positions_->emplace(hashOf(entries[covered_].first), covered_);
    last_ = entries.empty() ? std::weak_ptr<Object>() : entries.back().first;
    edits_ = edits;
    const auto [first, end] = positions_->equal_range(hash);
    for (auto it = first; it != end; ++it) {
      if (same(entries[it->second].first)) return it->second;
    }
    return entries.size();
  }

 private:
  bool current(const std::vector<std::pair<Value, Value>>& entries, unsigned edits) const {
    if (!positions_ || covered_ > entries.size()) return false;
    if (edits - edits_ != entries.size() - covered_) return false;  // unsigned: wraps alike
    if (covered_ == 0) return true;
    const Value last = last_.lock();
    return last && last == entries[covered_ - 1].first;
  }

  std::unique_ptr<std::unordered_multimap<size_t, size_t>> positions_;
  size_t covered_ = 0;
  std::weak_ptr<Object> last_;  // the key of entry covered_ - 1 when the index last looked
  unsigned edits_ = 0;          // the dict's keyEdits then
};

}  // namespace shardscope::trace
