// DictIndex: a dict's entries by key hash, so that a lookup in a large dict (a vocabulary's
// tokens, one per key) does not compare the key with every entry. A dict is a vector of entries
// in insertion order; the index is built by the first lookup of a dict past a few entries and
// extended as entries are appended. Lookups check it before each use rather than trust that it was
// told of every edit: the dict's count of key edits (Object::keyEdits, one an entry added, at least
// one a removal) must have grown by exactly the entries appended since, so that a removal it was
// not told of is seen; and the entries it covers must still end with the key it last saw (held
// weakly: no cycle through it, and a freed key's address cannot pass for it). Otherwise it is built
// again. A removal it is told of (erase) costs a hash lookup: entries keep the number they were
// indexed under, and their place is that number less the removed numbers below it, until the
// removed are an eighth of the entries and the index renumbers them.
#pragma once

#include <algorithm>
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
  using Entries = std::vector<std::pair<Value, Value>>;

  DictIndex() = default;
  DictIndex(const DictIndex&) {}  // a copy's entries are other objects: it builds its own
  DictIndex(DictIndex&&) = default;
  DictIndex& operator=(const DictIndex&) {
    clear();
    return *this;
  }
  DictIndex& operator=(DictIndex&&) = default;

  // The position of the entry whose key `same` accepts among those whose key hashes to `hash`, or
  // entries.size(). `edits` is the dict's Object::keyEdits; `hashOf` hashes a key as `hash` was
  // made.
  template <class Same, class Hash>
  size_t find(const Entries& entries, unsigned edits, size_t hash, Same&& same, Hash&& hashOf) {
    if (!current(entries, edits)) {
      clear();
      numbers_ = std::make_unique<std::unordered_multimap<size_t, size_t>>();
    }
    for (; covered_ < entries.size(); ++covered_)
      numbers_->emplace(hashOf(entries[covered_].first), next_++);
    last_ = entries.empty() ? std::weak_ptr<Object>() : entries.back().first;
    edits_ = edits;
    const auto [first, end] = numbers_->equal_range(hash);
    for (auto it = first; it != end; ++it) {
      const size_t at = position(it->second);
      if (same(entries[at].first)) return at;
    }
    return entries.size();
  }

  // Entry `at` of `entries` is about to be erased and the dict's keyEdits (`edits` now) bumped
  // once: a current index follows rather than being built again at the next lookup.
  template <class Hash>
  void erase(const Entries& entries, unsigned edits, size_t at, Hash&& hashOf) {
    if (!current(entries, edits) || covered_ != entries.size()) return clear();
    const auto [first, end] = numbers_->equal_range(hashOf(entries[at].first));
    auto it = first;
    while (it != end && position(it->second) != at) ++it;
    if (it == end) return clear();
    removed_.insert(std::upper_bound(removed_.begin(), removed_.end(), it->second), it->second);
    numbers_->erase(it);
    --covered_;
    edits_ = edits + 1;
    const size_t last = at + 1 < entries.size() ? entries.size() - 1 : at - 1;
    last_ = covered_ == 0 ? std::weak_ptr<Object>() : entries[last].first;
    if (removed_.size() > 32 && removed_.size() * 8 > covered_) renumber();
  }

  // Forgets everything (the dict was emptied, or the index is stale): its memory goes too.
  void clear() {
    numbers_.reset();
    removed_.clear();
    covered_ = next_ = 0;
  }

 private:
  bool current(const Entries& entries, unsigned edits) const {
    if (!numbers_ || covered_ > entries.size()) return false;
    if (edits - edits_ != entries.size() - covered_) return false;  // unsigned: wraps alike
    if (covered_ == 0) return true;
    const Value last = last_.lock();
    return last && last == entries[covered_ - 1].first;
  }

  // Where the entry indexed as `number` is now: the removed entries below it are gone.
  size_t position(size_t number) const {
    return number -
           size_t(std::lower_bound(removed_.begin(), removed_.end(), number) - removed_.begin());
  }

  void renumber() {
    for (auto& entry : *numbers_) entry.second = position(entry.second);
    removed_.clear();
    next_ = covered_;
  }

  std::unique_ptr<std::unordered_multimap<size_t, size_t>> numbers_;  // key hash -> number
  std::vector<size_t> removed_;  // numbers of the entries erased since the last renumbering
  size_t covered_ = 0;           // the entries indexed: the first covered_ of the dict
  size_t next_ = 0;              // the number the next appended entry gets
  std::weak_ptr<Object> last_;   // the key of entry covered_ - 1 when the index last looked
  unsigned edits_ = 0;           // the dict's keyEdits then
};

}  // namespace shardscope::trace
