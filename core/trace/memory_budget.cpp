#include "memory_budget.h"

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>
#include <unordered_set>
#include <vector>

#include "interpreter.h"

#ifdef SHARDSCOPE_WITH_NCCL
#include <cuda_runtime_api.h>
#endif

namespace shardscope::trace {
namespace {

constexpr int64_t kDeferBytes = int64_t(1) << 20;  // what a block may make before a deferred
                                                   // default limit is read
constexpr int64_t kObjectBytes = int64_t(sizeof(Object)) + 16;  // the object and its control block
// More than any memory, and far from overflowing a sum with what is held: larger requests and
// charges count as this much (a caller's saturated or wrapped-free estimate may be INT64_MAX).
constexpr int64_t kMostBytes = int64_t(1) << 60;

std::string mib(int64_t bytes) {
  std::ostringstream o;
  o.precision(1);
  o << std::fixed << double(bytes) / (1 << 20) << " MiB";
  return o.str();
}

// Counts each object once, and each tensor storage once. What is left to count is a list, not
// the C++ stack: a list nested 100000 levels deep is measured like a long one.
struct HeldCounter {
  std::unordered_set<const Object*> seen;
  std::unordered_set<const void*> storages;
  std::vector<const Object*> left;
  int64_t bytes = 0;

  void add(const Value& root) {
    push(root);
    while (!left.empty()) {
      const Object& v = *left.back();
      left.pop_back();
      bytes += kObjectBytes + int64_t(v.str.capacity());
      if (v.tensor.defined() && v.tensor.has_storage()) {
        const auto& storage = v.tensor.storage();
        if (storages.insert(storage.unsafeGetStorageImpl()).second)
          bytes += int64_t(storage.nbytes());
      }
      bytes += int64_t(v.items.capacity() * sizeof(Value));
      for (const auto& item : v.items) push(item);
      for (const auto& [k, x] : v.dict) {
        push(k);
        push(x);
      }
      for (const auto& [name, x] : v.attributes) push(x);
    }
  }

 private:
  void push(const Value& v) {
    if (v && seen.insert(v.get()).second) left.push_back(v.get());
  }
};

}  // namespace

MemoryBudget::MemoryBudget(int64_t limitBytes)
    : limit_(limitBytes),
      measureEvery_(std::clamp<int64_t>(limitBytes / 16, kDeferBytes, int64_t(256) << 20)) {}

MemoryBudget::MemoryBudget(std::function<int64_t()> readLimit)
    : limit_(0), resolve_(std::move(readLimit)), measureEvery_(kDeferBytes) {}

MemoryBudget MemoryBudget::deviceDefault(DeviceKind device, int64_t share) {
  return MemoryBudget(
      [device, share] { return defaultMemoryBudget(device) / std::max<int64_t>(1, share); });
}

void MemoryBudget::resolveFor(int64_t bytes) {
  if (!resolve_ || bytes < kDeferBytes) return;
  *this = MemoryBudget(resolve_());
}

std::string MemoryBudget::exceeded(int64_t held) const {
  return "memory budget of " + mib(limit_) + " exceeded: this block's values hold " + mib(held) +
         " (tensors, lists, dicts and strings it made or keeps); drop what it no longer needs, or "
         "raise the budget with --memory-budget-mb";
}

std::string MemoryBudget::charge(int64_t bytes, const std::function<int64_t()>& held) {
  if (!bounded()) return "";
  pending_ = std::min(pending_ + std::min(bytes, kMostBytes), kMostBytes);
  if (pending_ < measureEvery_) return "";
  resolveFor(pending_);
  if (!bounded()) return "";  // the device reported no memory to bound by
  pending_ = 0;
  lastHeld_ = held();
  // Measuring walks every value held: measure again only after half as much again was created,
  // so a block that grows a long list pays a walk per doubling, not per append.
  measureEvery_ = std::max(measureEvery_, lastHeld_ / 2);
  return lastHeld_ > limit_ ? exceeded(lastHeld_) : "";
}

std::string MemoryBudget::request(int64_t bytes, const std::function<int64_t()>& held) {
  if (!bounded()) return "";
  bytes = std::min(bytes, kMostBytes);
  resolveFor(bytes + lastHeld_);
  if (!bounded() || resolve_ || bytes <= limit_ - lastHeld_) return "";
  lastHeld_ = held();
  if (bytes <= limit_ - lastHeld_) return "";
  return "memory budget of " + mib(limit_) + " exceeded: this operation would create " +
         mib(bytes) + " next to the " + mib(lastHeld_) +
         " the block holds; raise the budget with --memory-budget-mb if the work is real";
}

int64_t newValuesBytes(int64_t count) {
  constexpr int64_t kEach = kObjectBytes + int64_t(sizeof(Value));
  return count <= 0 ? 0 : count > kMostBytes / kEach ? kMostBytes : count * kEach;
}

int64_t heldBytes(const Environment& scope, const Environment* stop, const Value& made) {
  HeldCounter counter;
  if (made) counter.add(made);
  for (const Environment* e = &scope; e && e != stop; e = e->parent().get()) {
    for (const auto& [name, v] : e->vars()) counter.add(v);
  }
  return counter.bytes;
}

int64_t defaultMemoryBudget(DeviceKind device) {
#ifdef SHARDSCOPE_WITH_NCCL
  if (device == DeviceKind::Cuda) {
    size_t free = 0, total = 0;
    if (cudaMemGetInfo(&free, &total) == cudaSuccess) return int64_t(free / 2);
  }
#endif
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  std::string unit;
  while (meminfo >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024 / 2;
  }
  return int64_t(8) << 30;  // no /proc: 8 GiB
}

}  // namespace shardscope::trace
