#include "coroutine.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "../error.h"
#include "stack_headroom.h"
#include "trace_device.h"

#if defined(__SANITIZE_ADDRESS__)
#define SHARDSCOPE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SHARDSCOPE_ASAN 1
#endif
#endif
#ifdef SHARDSCOPE_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

namespace shardscope::trace {

namespace {
thread_local c10::Device tlsDevice(c10::kCPU);
}  // namespace

c10::Device currentDevice() {
  return tlsDevice;
}
void setCurrentDevice(c10::Device d) {
  tlsDevice = d;
}

namespace {

// Stacks are kept per thread for reuse: mapping and unmapping them was a measurable part of a
// trace's fixed cost. Each stack has one guard page below it.
struct StackPool {
  std::vector<std::pair<void*, size_t>> free;
  ~StackPool() {
    for (auto& [p, n] : free) ::munmap(p, n);
  }
};
thread_local StackPool stackPool;

size_t pageSize() {
  static const size_t page = size_t(::sysconf(_SC_PAGESIZE));  // asked once, not per coroutine
  return page;
}

void* takeStack(size_t bytes) {
  auto& pool = stackPool.free;
  for (size_t i = 0; i < pool.size(); ++i) {
    if (pool[i].second != bytes + pageSize()) continue;
    void* p = pool[i].first;
    pool.erase(pool.begin() + long(i));
    return p;
  }
  void* p = ::mmap(nullptr, bytes + pageSize(), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    throw Error("cannot allocate a coroutine stack: " + std::string(std::strerror(errno)));
  }
  ::mprotect(p, pageSize(), PROT_NONE);  // an overflow faults instead of corrupting memory
  return p;
}

void giveStack(void* p, size_t bytes) {
  if (stackPool.free.size() < 16) {
    stackPool.free.emplace_back(p, bytes + pageSize());
  } else {
    ::munmap(p, bytes + pageSize());
  }
}

// AddressSanitizer is told about every switch between the caller's stack and the coroutine's
// (its fiber annotations); otherwise an exception thrown on the coroutine's stack makes it unpoison
// the wrong stack and report errors that are not there. Without ASan these compile to nothing.
void startSwitch(void** fakeStack, const void* bottom, size_t size) {
#ifdef SHARDSCOPE_ASAN
  __sanitizer_start_switch_fiber(fakeStack, bottom, size);
#else
  (void)fakeStack, (void)bottom, (void)size;
#endif
}

void finishSwitch(void* fakeStack, const void** bottomOld, size_t* sizeOld) {
#ifdef SHARDSCOPE_ASAN
  __sanitizer_finish_switch_fiber(fakeStack, bottomOld, sizeOld);
#else
  (void)fakeStack, (void)bottomOld, (void)sizeOld;
#endif
}

}  // namespace

Coroutine::Coroutine(std::function<void()> body, size_t stackBytes)
    : body_(std::move(body)), stackBytes_(stackBytes) {
  const size_t page = pageSize();
  stack_ = takeStack(stackBytes_);
  if (::getcontext(&self_) != 0) throw Error("getcontext failed");
  self_.uc_stack.ss_sp = static_cast<char*>(stack_) + page;
  self_.uc_stack.ss_size = stackBytes_;
  self_.uc_link = &caller_;
  const auto p = reinterpret_cast<uintptr_t>(this);
  ::makecontext(&self_, reinterpret_cast<void (*)()>(&Coroutine::entry), 2,
                unsigned(p & 0xffffffffu), unsigned(p >> 32));
}

Coroutine::~Coroutine() {
  // A coroutine destroyed while suspended abandons its stack frames (their destructors do not
  // run); the interleaver only does that when a job is failing.
  giveStack(stack_, stackBytes_);
}

void Coroutine::entry(unsigned lo, unsigned hi) {
  auto* self = reinterpret_cast<Coroutine*>(uintptr_t(lo) | (uintptr_t(hi) << 32));
  finishSwitch(nullptr, &self->callerStack_, &self->callerStackBytes_);
  self->body_();
  self->finished_ = true;
  self->running_ = false;
  // Returning switches to uc_link (the caller of the last resume()); this stack is done with.
  startSwitch(nullptr, self->callerStack_, self->callerStackBytes_);
}

void Coroutine::resume() {
  SS_ASSERT(!finished_ && !running_, "resume of a finished or running coroutine");
  running_ = true;
  void* fakeStack = nullptr;
  char* const low = static_cast<char*>(stack_) + pageSize();
  const StackBounds outer = switchStack({low, stackBytes_});  // until the body yields or ends
  startSwitch(&fakeStack, low, stackBytes_);
  ::swapcontext(&caller_, &self_);
  finishSwitch(fakeStack, nullptr, nullptr);
  switchStack(outer);
}

void Coroutine::yield() {
  SS_ASSERT(running_, "yield outside the coroutine");
  running_ = false;
  void* fakeStack = nullptr;
  startSwitch(&fakeStack, callerStack_, callerStackBytes_);
  ::swapcontext(&self_, &caller_);
  finishSwitch(fakeStack, &callerStack_, &callerStackBytes_);
}

}  // namespace shardscope::trace
