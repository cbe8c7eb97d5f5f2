// How much stack is left below the running code, so that recursion a script controls (calls of
// its functions, expressions nested in one another, walks over values nested in one another)
// ends in the script's error instead of a stack overflow that kills the process.
//
// Code runs either on its thread's stack (the driver, the GUI's worker) or on a coroutine's own
// 1 MiB stack (an invoke's block, coroutine.h); Coroutine::resume() makes its stack the current
// one for as long as the block runs and restores the resumer's when it yields or ends. A thread's
// own stack is looked up once, when first asked about.
//
// This is a safety net under the interpreter's counted limits (200 nested calls, 200 nesting
// levels of an expression, kMaxValueNesting for values): those give the errors Python gives, and
// this one catches what their product, or a larger frame (a sanitizer build), would overflow.
#pragma once

#include <cstddef>

namespace shardscope::trace {

// The stack [low, low + bytes) that code on this thread runs on. low == nullptr: not known (no
// check is made).
struct StackBounds {
  const char* low = nullptr;
  size_t bytes = 0;
};

// What must stay free below the deepest check: a builtin's or a torch op's own frames, throwing
// the error and unwinding to the statement that reports it.
constexpr size_t kStackReserve = size_t(256) << 10;

// Makes `next` the stack of the code this thread runs from now on and returns the one it
// replaces, to be restored when control comes back to that code.
StackBounds switchStack(StackBounds next);

// Whether fewer than kStackReserve bytes are left below the caller's frame on this thread's
// current stack (false when the stack is not known, or the caller is not on it).
bool stackNearlyFull();

}  // namespace shardscope::trace
