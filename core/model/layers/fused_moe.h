// FusedMoE (vLLM's name; Qwen3-MoE's `mlp.experts`). E experts, each a SwiGLU MLP
//   expert_e(x) = (silu(x G_e^T) * (x U_e^T)) D_e^T,  G_e, U_e: [I, H], D_e: [H, I],
// routed as HF's Qwen3MoeSparseMoeBlock: p = softmax(router_logits) in fp32, the top k of p
// (renormalised to sum to one when norm_topk_prob), cast back to the activations' dtype, and
//   y_t = sum over the chosen e of p_te * expert_e(x_t).
// DeepSeek-V2's router options (MoeConfig): group-limited top-k (the experts fall into n_group
// groups; only the topk_group groups of highest maximum p compete) and routed_scaling_factor,
// which scales the chosen weights.
// Split (output: this rank's partial sum of y; the block's all-reduce sums it):
//   default        rank r holds rows [r*I/tp, (r+1)*I/tp) of every G_e and U_e and the same
//                  columns of every D_e; silu is elementwise, so the slices' down projections sum
//                  to the whole expert.
//   expert parallel (vLLM's enable_expert_parallel) rank r holds experts [r*E/tp, (r+1)*E/tp)
//                  whole and computes them for the tokens routed to them; others add nothing.
// Tokens are grouped by expert and only experts with tokens run, so a decode step reads only the
// chosen experts' weights: on a GPU (up to a few hundred tokens) by the fused kernels, which keep
// the routing on the device so CUDA graphs record the step; elsewhere (GPU prefills, and every
// batch on the CPU) by GroupedExperts, which runs each expert's rows as one group.
// Parameters as vLLM's: w13_weight [E, 2I, H] (per rank [g_r | u_r] per expert, gathered in rank
// order as gate_up_proj is) and w2_weight [E, H, I].
#pragma once

#include <string>
#include <utility>

#include "../forward_batch.h"
#include "../model_config.h"
#include "../module.h"
#include "rms_norm.h"
#include "tp_rank.h"
#ifdef SHARDSCOPE_WITH_CUDA_KERNELS
#include "../../kernels/fused_ops.h"
#endif

namespace shardscope {

class FusedMoE : public Module {
 public:
  FusedMoE(std::string name, Module* parent, const ModelConfig& c, TpRank tp);
  const char* kind() const override { return "FusedMoE"; }
  // `prefix` names the experts in HF naming ("model.layers.0.mlp.experts"); loads this rank's
  // share of `<prefix>.<e>.{gate,up,down}_proj.weight`.
  void load(LoadContext& ctx, const std::string& prefix);
  // hidden: [T, H] whole, routerLogits: [T, E] whole  ->  [T, H] this rank's partial sum.
  // Visits input ((hidden, router_logits)) and output.
  at::Tensor forward(const at::Tensor& hidden, const at::Tensor& routerLogits,
                     const ForwardBatch& batch) const;
  // The block's router and experts at once for a step nobody observes (no port is visited):
  // routerWeight [E, H] is mlp.gate's. On a GPU for a decode step of a few tokens the router's
  // GEMV, the choice, the routing lists and the experts run as three kernels; undefined
  // otherwise (the caller runs the router and forward()).
  at::Tensor forwardUnobserved(const at::Tensor& hidden, const at::Tensor& routerWeight) const;
  // The same on norm(hidden + residual), the layer's post-attention norm folded into the router's
  // kernel: {y, hidden + residual}; undefined where the kernels do not take it, or when
  // SHARDSCOPE_FUSED_MOE_NORM=0 (fused::fusedMoeAfterNorm).
  std::pair<at::Tensor, at::Tensor> forwardAfterNorm(const at::Tensor& hidden,
                                                     const at::Tensor& residual,
                                                     const RMSNorm& norm,
                                                     const at::Tensor& routerWeight) const;
  // The routing: (topk_weights [T, k] in routerLogits' dtype, topk_ids [T, k] int64), each row's
  // experts by decreasing probability.
  std::pair<at::Tensor, at::Tensor> selectExperts(const at::Tensor& routerLogits) const;

  int64_t numExperts() const { return numExperts_; }
  int64_t topK() const { return topK_; }
  // The experts this rank computes: [firstLocalExpert, firstLocalExpert + localExperts).
  int64_t firstLocalExpert() const { return firstExpert_; }
  int64_t localExperts() const { return localExperts_; }
  // Whether the fused kernels take every step of up to maxTokens tokens (so the decoder's layers
  // can be recorded in CUDA graphs).
  static bool recordable(const ModelConfig& c, TpRank tp, int64_t maxTokens);

 private:
  at::Tensor onDevice(const at::Tensor& x, const at::Tensor& weights, const at::Tensor& ids) const;
  // The fused kernels from the router logits, the choice included (greedy top-k only).
  at::Tensor onDevice(const at::Tensor& x, const at::Tensor& routerLogits) const;
#ifdef SHARDSCOPE_WITH_CUDA_KERNELS
  fused::MoeRouting routing() const;
#endif
  at::Tensor grouped(const at::Tensor& x, const at::Tensor& weights, const at::Tensor& ids) const;

  int64_t numExperts_, topK_, hidden_, intermediate_;
  bool normTopkProb_;
  double routedScalingFactor_;
  TopkMethod topkMethod_;
  int64_t numGroups_, topkGroups_;
  TpRank tp_;
  int64_t firstExpert_, localExperts_, iPerRank_;
  at::Tensor w13_;  // [localExperts, 2 * iPerRank, H]: [gate | up] rows per expert
  at::Tensor w2_;   // [localExperts, H, iPerRank]
  // forwardUnobserved's router kernel counts its blocks here (int32, zero between launches).
  at::Tensor routerDone_;
};

}  // namespace shardscope
