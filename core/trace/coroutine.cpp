#include "coroutine.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

#include "../error.h"
#include "trace_device.h"

namespace shardscope::trace {

namespace {
thread_local c10::Device tlsDevice(c10::kCPU);
thread_local bool tlsWrite = false;
}  // namespace

c10::Device currentDevice() {
  return tlsDevice;
}
void setCurrentDevice(c10::Device d) {
  tlsDevice = d;
}
void noteTensorWrite() {
  tlsWrite = true;
}
bool takeTensorWrite() {
  const bool w = tlsWrite;
  tlsWrite = false;
  return w;
}

Coroutine::Coroutine(std::function<void()> body, size_t stackBytes)
    : body_(std::move(body)), stackBytes_(stackBytes) {
  const size_t page = size_t(::sysconf(_SC_PAGESIZE));
  // One guard page below the stack turns an overflow into a fault instead of silent corruption.
  stack_ = ::mmap(nullptr, stackBytes_ + page, PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (stack_ == MAP_FAILED)
    throw Error("cannot allocate a coroutine stack: " + std::string(std::strerror(errno)));
  ::mprotect(stack_, page, PROT_NONE);
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
  ::munmap(stack_, stackBytes_ + size_t(::sysconf(_SC_PAGESIZE)));
}

void Coroutine::entry(unsigned lo, unsigned hi) {
  auto* self = reinterpret_cast<Coroutine*>(uintptr_t(lo) | (uintptr_t(hi) << 32));
  self->body_();
  self->finished_ = true;
  self->running_ = false;
  // Returning switches to uc_link (the caller of the last resume()).
}

void Coroutine::resume() {
  SS_ASSERT(!finished_ && !running_, "resume of a finished or running coroutine");
  running_ = true;
  ::swapcontext(&caller_, &self_);
}

void Coroutine::yield() {
  SS_ASSERT(running_, "yield outside the coroutine");
  running_ = false;
  ::swapcontext(&self_, &caller_);
}

}  // namespace shardscope::trace
