// JobHandle (engine.h): the caller's side of a job, over the JobState the ranks fill in.
#include <chrono>
#include <mutex>

#include "engine.h"
#include "rank_context.h"

namespace shardscope {

JobProgress JobHandle::progress() const {
  return {state_->step.load(), state_->total.load()};
}

void JobHandle::cancel() {
  state_->cancelRequested = true;
}

bool JobHandle::done() const {
  std::lock_guard lock(state_->mutex);
  return state_->finished;
}

void JobHandle::wait() const {
  std::unique_lock lock(state_->mutex);
  state_->cv.wait(lock, [&] { return state_->finished; });
  if (state_->error) std::rethrow_exception(state_->error);
}

bool JobHandle::waitFor(int ms) const {
  std::unique_lock lock(state_->mutex);
  return state_->cv.wait_for(lock, std::chrono::milliseconds(ms), [&] { return state_->finished; });
}

}  // namespace shardscope
