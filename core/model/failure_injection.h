// FailureInjection: a test hook, compiled in and off by default, that makes one rank fail at one
// decoder layer of one step, so that tests can prove every failure ends a job with one clear error
// on every rank within a bounded time and that the next job succeeds (SPEC section 5). The layer
// runs eagerly on every rank when an injection targets its step (never inside a CUDA graph), so
// the ranks still agree on which layers replay graphs.
#pragma once

#include <cstdint>
#include <string>

namespace at {
class Tensor;
}

namespace shardscope {

struct ForwardBatch;

struct FailureInjection {
  enum class Kind {
    None,
    Throw,  // the rank throws an Error before the layer
    Stuck,  // the rank stops before the layer's first collective and waits until the group is
            // aborted (its collective never arrives)
    NaN,    // a NaN in the rank's copy of the layer's input (its shard of the computation)
  };
  Kind kind = Kind::None;
  int rank = 0;
  int64_t layer = 0;
  int64_t step = 0;

  bool armed() const { return kind != Kind::None; }
  // Whether layer `layer` of step `step` must run eagerly on every rank.
  bool targets(int64_t layer_, int64_t step_) const {
    return armed() && layer == layer_ && step == step_;
  }
  // "KIND:RANK:LAYER:STEP" with KIND throw|stuck|nan, e.g. "stuck:1:3:0"; throws Error otherwise.
  static FailureInjection parse(const std::string& spec);
  std::string describe() const;  // "throw on rank 1 at layer 3 of step 0"
};

// At the start of decoder layer `layer` on this rank: does what `f` asks when it targets this rank,
// layer and step; `hidden` is the layer's input.
void applyFailureInjection(const FailureInjection& f, int64_t layer, const ForwardBatch& batch,
                           at::Tensor& hidden);

}  // namespace shardscope
