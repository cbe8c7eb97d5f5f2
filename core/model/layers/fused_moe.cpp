#include "fused_moe.h"

#include <algorithm>

#include "../../error.h"
#include "../module_call.h"
#include "../weight_source.h"
#include "grouped_experts.h"

namespace shardscope {

FusedMoE::FusedMoE(std::string name, Module* parent, const ModelConfig& c, TpRank tp)
    : Module(std::move(name), parent),
      numExperts_(c.moe.numExperts),
      topK_(c.moe.numExpertsPerTok),
      hidden_(c.hiddenSize),
      intermediate_(c.moe.intermediateSize),
      normTopkProb_(c.moe.normTopkProb),
      routedScalingFactor_(c.moe.routedScalingFactor),
      topkMethod_(c.moe.topkMethod),
      numGroups_(c.moe.numGroups),
      topkGroups_(c.moe.topkGroups),
      tp_(tp) {
  if (tp.expertParallel) {
    SS_ASSERT(numExperts_ % tp.size == 0, path() + ": experts not divisible by tp");
    localExperts_ = numExperts_ / tp.size;
    firstExpert_ = tp.rank * localExperts_;
    iPerRank_ = intermediate_;
  } else {
    SS_ASSERT(intermediate_ % tp.size == 0, path() + ": moe_intermediate_size not divisible by tp");
    localExperts_ = numExperts_;
    firstExpert_ = 0;
    iPerRank_ = intermediate_ / tp.size;
  }
  setPorts(ShardSpec::whole(), ShardSpec::partialSum());
  // select_experts(router_logits) from a trace (vLLM's FusedMoE.select_experts): which experts
  // each token chose and with what weight, without re-deriving the routing.
  addMethod({"select_experts", "select_experts(router_logits)", [this](const ModuleCall& call) {
               const at::Tensor& logits = call.tensor(0, "the router logits (mlp.gate.output[0])");
               if (logits.dim() != 2 || logits.size(1) != numExperts_) {
                 throw ModuleCallError(call.callee() + "(): expected router logits of shape [T, " +
                                       std::to_string(numExperts_) +
                                       "] (mlp.gate.output[0]), got " + c10::str(logits.sizes()));
               }
               auto [weights, ids] = selectExperts(logits);
               return std::vector<at::Tensor>{weights, ids};
             }});
}

void FusedMoE::load(LoadContext& ctx, const std::string& prefix) {
  const int64_t I = intermediate_, H = hidden_;
  // Default layout: this rank's slice of the intermediate dimension; expert parallel: all of it.
  const int64_t i0 = tp_.expertParallel ? 0 : tp_.rank * iPerRank_;
  const auto rows = SliceSpec::along(0, i0, iPerRank_);
  const auto cols = SliceSpec::along(1, i0, iPerRank_);
  std::vector<at::Tensor> w13, w2;
  for (int64_t e = firstExpert_; e < firstExpert_ + localExperts_; ++e) {
    const std::string p = prefix + "." + std::to_string(e) + ".";
    w13.push_back(at::cat({ctx.load(p + "gate_proj.weight", {I, H}, rows),
                           ctx.load(p + "up_proj.weight", {I, H}, rows)},
                          0));
    w2.push_back(ctx.load(p + "down_proj.weight", {H, I}, cols));
  }
  w13_ = at::stack(w13, 0);
  w2_ = at::stack(w2, 0);
  routerDone_ = at::zeros({1}, at::TensorOptions().dtype(at::kInt).device(ctx.device));
  const int64_t w13Split = tp_.expertParallel ? 0 : 1, w2Split = tp_.expertParallel ? 0 : 2;
  addParameter({"w13_weight", w13_, {numExperts_, 2 * I, H}, w13Split});
  addParameter({"w2_weight", w2_, {numExperts_, H, I}, w2Split});
}

std::pair<at::Tensor, at::Tensor> FusedMoE::selectExperts(const at::Tensor& routerLogits) const {
#ifdef SHARDSCOPE_WITH_CUDA_KERNELS
  if (topkMethod_ == TopkMethod::Greedy) {
    auto chosen = fused::moeSelect(routerLogits, routing());
    if (chosen.first.defined()) return chosen;
  }
#endif
  at::Tensor probs = at::softmax(routerLogits, -1, at::kFloat);
  if (topkMethod_ == TopkMethod::GroupLimitedGreedy) {
    // Experts outside the chosen groups score 0, as HF's DeepseekV2TopkRouter masks them.
    const int64_t T = probs.size(0);
    const at::Tensor groupScores = std::get<0>(probs.view({T, numGroups_, -1}).max(-1));
    const at::Tensor groups = std::get<1>(groupScores.topk(topkGroups_, -1));
    const at::Tensor keep = at::zeros_like(groupScores).scatter_(1, groups, 1.0).unsqueeze(-1);
    probs = (probs.view({T, numGroups_, -1}) * keep).view({T, numExperts_});
  }
  auto [weights, ids] = probs.topk(topK_, -1);
  if (normTopkProb_) weights = weights / weights.sum(-1, true);
  if (routedScalingFactor_ != 1.0) weights = weights * routedScalingFactor_;
  return {weights.to(routerLogits.scalar_type()), ids};
}

at::Tensor FusedMoE::forward(const at::Tensor& hiddenStates, const at::Tensor& routerLogits,
                             const ForwardBatch& batch) const {
  PortValue in = PortValue::pair(hiddenStates, routerLogits);
  batch.visit(*this, PortRole::Input, in);
  const at::Tensor& x = in.items[0];
  at::Tensor y = onDevice(x, in.items[1]);
  if (!y.defined()) {
    auto [weights, ids] = selectExperts(in.items[1]);
    y = onDevice(x, weights, ids);
    if (!y.defined()) y = grouped(x, weights, ids);
  }
  PortValue out = PortValue::single(y);
  batch.visit(*this, PortRole::Output, out);
  return out.items[0];
}

at::Tensor FusedMoE::forwardUnobserved(const at::Tensor& hidden,
                                       const at::Tensor& routerWeight) const {
#ifdef SHARDSCOPE_WITH_CUDA_KERNELS
  if (topkMethod_ != TopkMethod::Greedy) return {};
  return fused::fusedMoe(hidden, routerWeight, routerDone_, routing(), w13_, w2_, firstExpert_);
#else
  (void)hidden, (void)routerWeight;
  return {};
#endif
}

std::pair<at::Tensor, at::Tensor> FusedMoE::forwardAfterNorm(const at::Tensor& hidden,
                                                             const at::Tensor& residual,
                                                             const RMSNorm& norm,
                                                             const at::Tensor& routerWeight) const {
#ifdef SHARDSCOPE_WITH_CUDA_KERNELS
  if (topkMethod_ != TopkMethod::Greedy) return {};
  fused::NormIn in;
  in.residual = residual;
  in.weight = norm.weight();
  in.eps = norm.eps();
  return fused::fusedMoeAfterNorm(hidden, in, routerWeight, routerDone_, routing(), w13_, w2_,
                                  firstExpert_);
#else
  (void)hidden, (void)residual, (void)norm, (void)routerWeight;
  return {};
#endif
}

bool FusedMoE::recordable(const ModelConfig& c, TpRank tp, int64_t maxTokens) {
#ifdef SHARDSCOPE_WITH_CUDA_KERNELS
  const int64_t local = tp.expertParallel ? c.moe.numExperts / tp.size : c.moe.numExperts;
  const int64_t inter =
      tp.expertParallel ? c.moe.intermediateSize : c.moe.intermediateSize / tp.size;
  return fused::fusedMoeTakes(maxTokens, c.moe.numExpertsPerTok, c.hiddenSize, inter, local);
#else
  (void)c, (void)tp, (void)maxTokens;
  return false;
#endif
}

at::Tensor FusedMoE::onDevice(const at::Tensor& x, const at::Tensor& weights,
                              const at::Tensor& ids) const {
#ifdef SHARDSCOPE_WITH_CUDA_KERNELS
  return fused::fusedMoe(x, weights, ids, w13_, w2_, firstExpert_);
#else
  (void)x, (void)weights, (void)ids;
  return {};
#endif
}

at::Tensor FusedMoE::onDevice(const at::Tensor& x, const at::Tensor& routerLogits) const {
#ifdef SHARDSCOPE_WITH_CUDA_KERNELS
  if (topkMethod_ != TopkMethod::Greedy) return {};
  return fused::fusedMoe(x, routerLogits, routing(), w13_, w2_, firstExpert_);
#else
  (void)x, (void)routerLogits;
  return {};
#endif
}

#ifdef SHARDSCOPE_WITH_CUDA_KERNELS
fused::MoeRouting FusedMoE::routing() const {
  fused::MoeRouting r;
  r.topK = topK_;
  r.normTopkProb = normTopkProb_;
  r.scale = routedScalingFactor_;
  return r;
}
#endif

at::Tensor FusedMoE::grouped(const at::Tensor& x, const at::Tensor& weights,
                             const at::Tensor& ids) const {
  return groupedExperts(x, weights, ids, w13_, w2_, firstExpert_, numExperts_);
}

}  // namespace shardscope
