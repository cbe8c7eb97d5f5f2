// DeferredCalls: the module calls a trace block makes whose output rows each depend only on the
// same rows of their arguments (Module::callRowWise: the logits processor, an MLP block). A call
// is held until the script needs its value; then every held call of that module with alike
// arguments runs as one call over their stacked rows, and each gets its own rows back. The logit
// lens's 28 `logits_processor(lm_head, norm(h))` calls so stream the LM head once, not 28 times.
//
// Each rank's mediator holds and runs its calls at the same statements (the script and the whole
// values it sees are the same on every rank), so the collectives inside a call still pair up.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "../model/module.h"
#include "../model/module_call.h"
#include "value.h"

namespace shardscope::trace {

class DeferredCalls {
 public:
  // Runs one call of `m` with `args` (made at step `step`) and returns its single output.
  using Runner =
      std::function<at::Tensor(const Module& m, std::vector<CallArg> args, int64_t step)>;

  explicit DeferredCalls(Runner run);
  // Calls still held fail when read, saying that the block ended first.
  ~DeferredCalls();
  DeferredCalls(const DeferredCalls&) = delete;
  DeferredCalls& operator=(const DeferredCalls&) = delete;

  // Whether a call of `m` with `args` can be held: `m` is row-wise and every tensor argument has
  // rows (two or more dimensions) of one count.
  static bool holdable(const Module& m, const std::vector<CallArg>& args);
  // Holds the call and returns what computes its output, running the call's group when it has
  // not run yet. Tensor arguments are copied (the script may edit them before the call runs),
  // except those `unshared` marks: values only this call can reach (a temporary of the script).
  // The output comes with where it lies among the group's (StackedRow) when the group's calls all
  // had the same rows.
  std::function<StackedRow()> hold(const Module& m, std::vector<CallArg> args, int64_t step,
                                   const std::vector<bool>& unshared = {});

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace shardscope::trace
