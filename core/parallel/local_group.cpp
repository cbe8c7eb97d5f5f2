#include "local_group.h"

#include <condition_variable>
#include <mutex>

#include "../error.h"
#include "collective_board.h"

namespace shardscope {

// A reusable barrier with abort and timeout, plus one slot per rank for exchanged tensors and the
// group's collective board.
class LocalGroupState {
 public:
  explicit LocalGroupState(int size) : size_(size), slots_(size), board_(size) {}

  int size() const { return size_; }
  CollectiveBoard& board() { return board_; }

  // `again`: the second wait of one collective (every rank has read the slots).
  void arriveAndWait(int rank, const char* op, std::chrono::milliseconds timeout,
                     bool again = false) {
    board_.enter(rank, op, again);
    std::unique_lock lock(mutex_);
    throwIfAborted();
    const uint64_t generation = generation_;
    if (++arrived_ == size_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      lock.unlock();
      board_.leave(rank);
      return;
    }
    const bool done =
        cv_.wait_for(lock, timeout, [&] { return generation_ != generation || aborted_; });
    if (aborted_) throwIfAborted();
    if (!done) {
      const std::string what = board_.collectiveOf(rank);
      const std::string message =
          "collective " + what + " timed out after " + std::to_string(timeout.count()) +
          " ms on rank " + std::to_string(rank) +
          ": a rank did not reach the same collective (every rank must call the same "
          "collectives in the same order); what each rank was doing:" +
          board_.describe();
      aborted_ = true;
      reason_ = message;
      cv_.notify_all();
      throw CollectiveTimeout(message);
    }
    lock.unlock();
    board_.leave(rank);
  }

  void abort(const std::string& reason) {
    std::lock_guard lock(mutex_);
    if (!aborted_) reason_ = reason;
    aborted_ = true;
    cv_.notify_all();
  }

  bool aborted() const {
    std::lock_guard lock(mutex_);
    return aborted_;
  }

  std::string reason() const {
    std::lock_guard lock(mutex_);
    return reason_;
  }

  void reset() {
    std::lock_guard lock(mutex_);
    aborted_ = false;
    reason_.clear();
    arrived_ = 0;
    ++generation_;
    for (auto& s : slots_) s = at::Tensor();
    board_.clear();
  }

  std::vector<at::Tensor>& slots() { return slots_; }

 private:
  void throwIfAborted() const {
    if (aborted_) throw CollectiveAborted("collective aborted: " + reason_);
  }

  const int size_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  bool aborted_ = false;
  std::string reason_;
  std::vector<at::Tensor> slots_;
  CollectiveBoard board_;
};

std::vector<std::unique_ptr<LocalGroup>> LocalGroup::create(int size) {
  if (size < 1) throw Error("a process group needs at least one rank, got " + std::to_string(size));
  auto state = std::make_shared<LocalGroupState>(size);
  std::vector<std::unique_ptr<LocalGroup>> groups;
  for (int r = 0; r < size; ++r) groups.push_back(std::make_unique<LocalGroup>(r, state));
  return groups;
}

LocalGroup::LocalGroup(int rank, std::shared_ptr<LocalGroupState> state)
    : rank_(rank), state_(std::move(state)) {}

LocalGroup::~LocalGroup() = default;

int LocalGroup::size() const {
  return state_->size();
}

const std::vector<at::Tensor>& LocalGroup::exchange(const at::Tensor& t, const char* op) {
  state_->slots()[rank_] = t;
  state_->arriveAndWait(rank_, op, options().timeout);
  return state_->slots();
}

void LocalGroup::release(const char* op) {
  state_->arriveAndWait(rank_, op, options().timeout, /*again=*/true);
}

at::Tensor LocalGroup::allGather(const at::Tensor& local, int64_t dim) {
  if (size() == 1) return local.clone();
  const auto& slots = exchange(local, "allGather");
  at::Tensor out = at::cat(slots, dim);
  release("allGather");
  return out;
}

void LocalGroup::allReduceSum(at::Tensor& tensor) {
  if (size() == 1) return;
  const auto& slots = exchange(tensor, "allReduceSum");
  at::Tensor sum = slots[0].clone();
  for (int r = 1; r < size(); ++r) sum.add_(slots[r]);
  release("allReduceSum");  // nobody reads the slots any more: safe to overwrite our own input
  tensor.copy_(sum);
}

void LocalGroup::broadcast(at::Tensor& tensor, int root) {
  if (size() == 1) return;
  const auto& slots = exchange(tensor, "broadcast");
  at::Tensor value = rank_ == root ? at::Tensor() : slots[root].clone();
  release("broadcast");
  if (rank_ != root) tensor.copy_(value);
}

void LocalGroup::barrier() {
  if (size() == 1) return;
  state_->arriveAndWait(rank_, "barrier", options().timeout);
}

void LocalGroup::abort(const std::string& reason) {
  state_->abort(reason);
}

bool LocalGroup::aborted() const {
  return state_->aborted();
}

std::string LocalGroup::abortReason() const {
  return state_->reason();
}

void LocalGroup::reset() {
  state_->reset();
}

}  // namespace shardscope
