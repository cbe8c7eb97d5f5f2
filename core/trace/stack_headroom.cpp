#include "stack_headroom.h"

#include <pthread.h>

#include <cstdint>

namespace shardscope::trace {
namespace {

// The thread's own stack, as pthreads reports it (the main thread's too, from its rlimit).
StackBounds threadStack() {
  StackBounds s;
  pthread_attr_t attr;
  if (pthread_getattr_np(pthread_self(), &attr) != 0) return s;
  void* low = nullptr;
  size_t bytes = 0;
  if (pthread_attr_getstack(&attr, &low, &bytes) == 0) {
    s.low = static_cast<const char*>(low);
    s.bytes = bytes;
  }
  pthread_attr_destroy(&attr);
  return s;
}

// Trivially destructible, so that it may be read during a thread's (or the process's) teardown.
thread_local StackBounds current;
thread_local bool known = false;

const StackBounds& currentStack() {
  if (!known) {
    current = threadStack();
    known = true;
  }
  return current;
}

}  // namespace

StackBounds switchStack(StackBounds next) {
  const StackBounds previous = currentStack();
  current = next;
  return previous;
}

bool stackNearlyFull() {
  const StackBounds& s = currentStack();
  if (!s.low) return false;
  const auto here = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
  const auto low = reinterpret_cast<uintptr_t>(s.low);
  if (here < low || here >= low + s.bytes) return false;  // on another stack (a signal's, say)
  return here - low < kStackReserve;
}

}  // namespace shardscope::trace
