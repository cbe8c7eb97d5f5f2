// FeedForward: what a decoder layer's `mlp` is to the layer: [T, H] whole in, [T, H] whole out.
// The dense SwiGLU MLP (dense_decoder.h) and Qwen3-MoE's sparse block (qwen3_moe.h) implement it,
// so DecoderLayer holds either without knowing which.
#pragma once

#include <string>
#include <vector>

#include "../forward_batch.h"
#include "../layers/rms_norm.h"
#include "../layers/tp_rank.h"
#include "../module.h"
#include "../module_call.h"

namespace shardscope {

class FeedForward : public Module {
 public:
  using Module::Module;
  // `hfPrefix` is the block in HF naming ("model.layers.3.mlp").
  virtual void load(LoadContext& ctx, const std::string& hfPrefix) = 0;
  // x: [T, H] whole  ->  [T, H] whole. Visits the block's ports and its children's.
  virtual at::Tensor forward(const at::Tensor& x, const ForwardBatch& batch) const = 0;
  // A step nobody observes (no port is visited): the block on norm(x + residual), the layer's
  // norm folded into the block's first kernel; {y, x + residual}. Undefined tensors where the
  // block's kernels do not take it: the layer then runs the norm and forward().
  virtual std::pair<at::Tensor, at::Tensor> forwardAfterNorm(const at::Tensor& x,
                                                             const at::Tensor& residual,
                                                             const RMSNorm& norm,
                                                             const ForwardBatch& batch) const {
    (void)x, (void)residual, (void)norm, (void)batch;
    return {};
  }
  // mlp(x) from a trace: the block on a whole [T, H] (its own all-reduce included).
  bool callableWithWhole() const override { return true; }
  std::vector<at::Tensor> callWhole(const ModuleCall& call) const override {
    return {forward(call.tensor(0, "x"), call.batch())};
  }
  bool callRowWise() const override { return true; }  // each token through the block alone
};

}  // namespace shardscope
