#include "fused_moe.h"

#include "../../error.h"
#include "../module_call.h"
#include "../weight_source.h"
#include "linear.h"

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
    w13.push_back(at::cat({ctx.source.load(p + "gate_proj.weight", {I, H}, rows, ctx.dtype),
                           ctx.source.load(p + "up_proj.weight", {I, H}, rows, ctx.dtype)},
                          0));
    w2.push_back(ctx.source.load(p + "down_proj.weight", {H, I}, cols, ctx.dtype));
  }
  w13_ = at::stack(w13, 0).to(ctx.device);
  w2_ = at::stack(w2, 0).to(ctx.device);
  const int64_t w13Split = tp_.expertParallel ? 0 : 1, w2Split = tp_.expertParallel ? 0 : 2;
  addParameter({"w13_weight", w13_, {numExperts_, 2 * I, H}, w13Split});
  addParameter({"w2_weight", w2_, {numExperts_, H, I}, w2Split});
}

std::pair<at::Tensor, at::Tensor> FusedMoE::selectExperts(const at::Tensor& routerLogits) const {
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
  auto [weights, ids] = selectExperts(in.items[1]);
  at::Tensor y = at::zeros_like(x);
  if (x.size(0) > 0) {
    // Group the (token, choice) pairs by expert: a stable sort keeps tokens in order per expert.
    const at::Tensor flat = ids.reshape(-1);
    const at::Tensor order = std::get<1>(flat.sort(c10::optional<bool>(true), 0));
    const at::Tensor tokens = at::div(order, topK_, "trunc");
    const at::Tensor routeWeights = weights.reshape(-1).index_select(0, order).unsqueeze(1);
    const at::Tensor counts = at::bincount(flat, {}, numExperts_).to(at::kCPU);
    const int64_t* count = counts.data_ptr<int64_t>();
    int64_t offset = 0;
    for (int64_t e = 0; e < firstExpert_; ++e) offset += count[e];
    for (int64_t local = 0; local < localExperts_; ++local) {
      const int64_t n = count[firstExpert_ + local];
      if (n == 0) continue;
      const at::Tensor rows = tokens.narrow(0, offset, n);
      const at::Tensor gateUp = linearForward(x.index_select(0, rows), w13_[local]);
      const at::Tensor h =
          at::silu(gateUp.narrow(-1, 0, iPerRank_)) * gateUp.narrow(-1, iPerRank_, iPerRank_);
      y.index_add_(0, rows, linearForward(h, w2_[local]) * routeWeights.narrow(0, offset, n));
      offset += n;
    }
  }
  PortValue out = PortValue::single(y);
  batch.visit(*this, PortRole::Output, out);
  return out.items[0];
}

}  // namespace shardscope
