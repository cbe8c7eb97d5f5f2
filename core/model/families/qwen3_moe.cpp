#include "qwen3_moe.h"

#include "../../parallel/collective_board.h"

namespace shardscope {

Qwen3MoeSparseMoeBlock::Qwen3MoeSparseMoeBlock(Module* parent, const ModelConfig& c, TpRank tp)
    : FeedForward("mlp", parent) {
  gate = child<ReplicatedLinear>("gate", this, c.hiddenSize, c.moe.numExperts);
  experts = child<FusedMoE>("experts", this, c, tp);
}

void Qwen3MoeSparseMoeBlock::load(LoadContext& ctx, const std::string& hf) {
  gate->load(ctx, hf + ".gate");
  experts->load(ctx, hf + ".experts");
}

at::Tensor Qwen3MoeSparseMoeBlock::forward(const at::Tensor& x, const ForwardBatch& b) const {
  PortValue in = PortValue::single(x);
  b.visit(*this, PortRole::Input, in);
  // Nobody observes mlp.gate or mlp.experts: the router runs inside the experts' kernels.
  at::Tensor y =
      b.observer ? at::Tensor() : experts->forwardUnobserved(in.items[0], gate->weight());
  if (!y.defined()) y = experts->forward(in.items[0], gate->forward(in.items[0], b), b);
  {
    CollectiveSite site(experts->path(), b.step);
    b.group.allReduceSum(y);
  }
  PortValue out = PortValue::single(y);
  b.visit(*this, PortRole::Output, out);
  return out.items[0];
}

std::pair<at::Tensor, at::Tensor> Qwen3MoeSparseMoeBlock::forwardAfterNorm(
    const at::Tensor& x, const at::Tensor& residual, const RMSNorm& norm,
    const ForwardBatch& b) const {
  auto [y, r] = experts->forwardAfterNorm(x, residual, norm, gate->weight());
  if (!y.defined()) return {};
  CollectiveSite site(experts->path(), b.step);
  b.group.allReduceSum(y);
  return {y, r};
}

}  // namespace shardscope
