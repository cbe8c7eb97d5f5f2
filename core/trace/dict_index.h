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
    if (!current(entries, edits)) s_ = std::make_unique<State>();
    State& s = *s_;
    for (; s.covered < entries.size(); ++s.covered)
      s.numbers.emplace(hashOf(entries[s.covered].first), s.next++);
    s.last = entries.empty() ? std::weak_ptr<Object>() : entries.back().first;
    s.edits = edits;
    const auto [first, end] = s.numbers.equal_range(hash);
    for (auto it = first; it != end; ++it) {
      const size_t at = s.position(it->second);
      if (same(entries[at].first)) return at;
    }
    return entries.size();
  }

  // Entry `at` of `entries` is about to be erased and the dict's keyEdits (`edits` now) bumped
  // once: a current index follows rather than being built again at the next lookup.
  template <class Hash>
  void erase(const Entries& entries, unsigned edits, size_t at, Hash&& hashOf) {
    if (!current(entries, edits) || s_->covered != entries.size()) return clear();
    State& s = *s_;
    const auto [first, end] = s.numbers.equal_range(hashOf(entries[at].first));
    auto it = first;
    while (it != end && s.position(it->second) != at) ++it;
    if (it == end) return clear();
    s.removed.insert(std::upper_bound(s.removed.begin(), s.removed.end(), it->second), it->second);
    s.numbers.erase(it);
    --s.covered;
    s.edits = edits + 1;
    const size_t last = at + 1 < entries.size() ? entries.size() - 1 : at - 1;
    s.last = s.covered == 0 ? std::weak_ptr<Object>() : entries[last].first;
    if (s.removed.size() > 32 && s.removed.size() * 8 > s.covered) s.renumber();
  }

  // Forgets everything (the dict was emptied, or the index is stale): its memory goes too.
  void clear() { s_.reset(); }

 private:
  // All of it on the heap, so that a value that is no large dict (most are) pays one pointer.
  struct State {
    std::unordered_multimap<size_t, size_t> numbers;  // key hash -> the entry's number
    std::vector<size_t> removed;  // numbers of the entries erased since the last renumbering
    size_t covered = 0;           // the entries indexed: the first `covered` of the dict
    size_t next = 0;              // the number the next appended entry gets
    std::weak_ptr<Object> last;   // the key of entry covered - 1 when the index last looked
    unsigned edits = 0;           // the dict's keyEdits then

    // Where the entry indexed as `number` is now: the removed entries below it are gone.
    size_t position(size_t number) const {
      return number -
             size_t(std::lower_bound(removed.begin(), removed.end(), number) - removed.begin());
    }
    void renumber() {
      for (auto& entry : numbers) entry.second = position(entry.second);
      removed.clear();
      next = covered;
    }
  };

  bool current(const Entries& entries, unsigned edits) const {
    if (!s_ || s_->covered > entries.size()) return false;
    if (edits - s_->edits != entries.size() - s_->covered) return false;  // unsigned: wraps alike
    if (s_->covered == 0) return true;
    const Value last = s_->last.lock();
    return last && last == entries[s_->covered - 1].first;
  }

  std::unique_ptr<State> s_;
};

}  // namespace shardscope::trace
