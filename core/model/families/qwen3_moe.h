// Qwen3-MoE's sparse feed-forward block, mirroring vLLM's Qwen3MoeSparseMoeBlock (qwen3_moe.py):
//   router_logits, _ = gate(x)              ReplicatedLinear: [T, E], whole on every rank
//   y = experts(x, router_logits)           FusedMoE: [T, H], this rank's partial sum
//   y = all_reduce(y)                       the block's own reduce: whole
// Module tree: layers[i].mlp.{gate, experts}. A Qwen3-MoE model is the dense decoder
// (dense_decoder.h) with this block as `mlp` in its sparse layers (ModelConfig::isSparseLayer).
#pragma once

#include "../layers/fused_moe.h"
#include "../layers/replicated_linear.h"
#include "../model_config.h"
#include "feed_forward.h"

namespace shardscope {

// "mlp" of a sparse layer: [T, H] -> [T, H].
class Qwen3MoeSparseMoeBlock : public FeedForward {
 public:
  Qwen3MoeSparseMoeBlock(Module* parent, const ModelConfig& c, TpRank tp);
  const char* kind() const override { return "Qwen3MoeSparseMoeBlock"; }
  void load(LoadContext& ctx, const std::string& hfPrefix) override;
  at::Tensor forward(const at::Tensor& x, const ForwardBatch& batch) const override;
  // The norm inside the router's kernel (FusedMoE::forwardAfterNorm), then the block's reduce.
  std::pair<at::Tensor, at::Tensor> forwardAfterNorm(const at::Tensor& x,
                                                     const at::Tensor& residual,
                                                     const RMSNorm& norm,
                                                     const ForwardBatch& batch) const override;

  ReplicatedLinear* gate;
  FusedMoE* experts;
};

}  // namespace shardscope
