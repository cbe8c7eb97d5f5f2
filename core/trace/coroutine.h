// Coroutine: a stackful coroutine (ucontext) so that an invoke's block can suspend at a port and
// be resumed by the model's thread at the next visit, without an OS thread per invoke. The body
// must not let exceptions escape (they cannot cross a context switch); resume() and yield() must
// be called from the thread that created the coroutine.
#pragma once

#include <ucontext.h>

#include <functional>

namespace shardscope::trace {

class Coroutine {
 public:
  explicit Coroutine(std::function<void()> body, size_t stackBytes = size_t(1) << 20);
  ~Coroutine();
  Coroutine(const Coroutine&) = delete;
  Coroutine& operator=(const Coroutine&) = delete;

  // Runs the body until it yields or returns.
  void resume();
  // Called from inside the body: returns control to resume()'s caller.
  void yield();
  bool finished() const { return finished_; }

 private:
  static void entry(unsigned lo, unsigned hi);

  std::function<void()> body_;
  void* stack_ = nullptr;
  size_t stackBytes_;
  ucontext_t self_{}, caller_{};
  const void* callerStack_ = nullptr;  // the resuming thread's stack, for ASan's fiber switches
  size_t callerStackBytes_ = 0;
  bool finished_ = false;
  bool running_ = false;
};

}  // namespace shardscope::trace
