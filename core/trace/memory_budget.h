// MemoryBudget: bounds the bytes a block's values hold (tensors it made or keeps, lists, dicts,
// strings), beside the instruction budget, so a runaway script fails at its line instead of being
// killed by the kernel's OOM killer or taking the GUI down with it.
//
// Operations charge what they create; charges only trigger a measurement (every `measureEvery`
// bytes), which walks the values reachable from the block's scopes and counts each tensor storage
// once. A single request larger than what is left (`[0] * 10**12`) is refused before allocating.
// The default budget (half of the free memory) is read only once the block has created or asks
// for 1 MiB: reading the free memory costs tens of microseconds, more than a small trace does.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "../engine/engine_types.h"

namespace shardscope::trace {

class Environment;
struct Object;
using Value = std::shared_ptr<Object>;

class MemoryBudget {
 public:
  // limitBytes <= 0: unbounded.
  explicit MemoryBudget(int64_t limitBytes);
  // A limit that `readLimit` gives when first needed (at most once).
  explicit MemoryBudget(std::function<int64_t()> readLimit);
  // defaultMemoryBudget(device) / share, read when first needed.
  static MemoryBudget deviceDefault(DeviceKind device, int64_t share = 1);

  // Notes `bytes` newly created; measures with `held` when enough has accumulated. Returns an
  // error message when the budget is exceeded, else an empty string.
  std::string charge(int64_t bytes, const std::function<int64_t()>& held);
  // Checks, before allocating, that a request of `bytes` fits next to what was last held.
  std::string request(int64_t bytes, const std::function<int64_t()>& held);

 private:
  std::string exceeded(int64_t held) const;
  bool bounded() const { return limit_ > 0 || resolve_; }
  // Reads a deferred default limit once `bytes` are at stake (below kDeferBytes nothing is read).
  void resolveFor(int64_t bytes);

  int64_t limit_;
  std::function<int64_t()> resolve_;  // set while the default limit has not been read
  int64_t measureEvery_;
  int64_t pending_ = 0;
  int64_t lastHeld_ = 0;
};

// What `count` new values take (each object, its control block, its slot in a list): asked of the
// budget before a list of them is built (list(range(10**9)) made them all first).
int64_t newValuesBytes(int64_t count);

// Bytes held by the values reachable from `scope` and its parents up to (not including) `stop`,
// and from `made` (a value just made, not yet bound to a name; may be null): tensor storages
// counted once (a view of a held tensor adds nothing), containers and strings by their size.
int64_t heldBytes(const Environment& scope, const Environment* stop, const Value& made = nullptr);

// The default budget for blocks whose tensors live on `deviceType` ("cpu" or "cuda"): half of the
// memory free there now.
int64_t defaultMemoryBudget(DeviceKind device);

}  // namespace shardscope::trace
