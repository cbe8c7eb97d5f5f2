#include "rms_norm.h"

#include "../module_call.h"
#include "../weight_source.h"
#ifdef SHARDSCOPE_WITH_CUDA_KERNELS
#include "../../kernels/fused_ops.h"
#endif

namespace shardscope {

RMSNorm::RMSNorm(std::string name, Module* parent, int64_t dim, double eps, ShardSpec ports)
    : Module(std::move(name), parent), dim_(dim), eps_(eps) {
  setPorts(ports, ports);
}

std::vector<at::Tensor> RMSNorm::callWhole(const ModuleCall& call) const {
  return {apply(call.tensor(0, "x"))};
}

void RMSNorm::load(LoadContext& ctx, const std::string& hfName) {
  weight_ = ctx.load(hfName, {dim_}, SliceSpec::whole());
  addParameter({"weight", weight_, {dim_}, -1});
}

at::Tensor RMSNorm::apply(const at::Tensor& x) const {
#ifdef SHARDSCOPE_WITH_CUDA_KERNELS
  // On the GPU one kernel instead of eight launches, rounding where Hugging Face rounds.
  if (fused::usable(x, weight_)) return fused::rmsNorm(x, weight_, eps_);
#endif
  at::Tensor xf = x.to(at::kFloat);
  at::Tensor var = xf.pow(2).mean(-1, /*keepdim=*/true);
  return weight_ * (xf * at::rsqrt(var + eps_)).to(x.scalar_type());
}

at::Tensor RMSNorm::forward(const at::Tensor& x, const ForwardBatch& batch) const {
  PortValue in = PortValue::single(x);
  batch.visit(*this, PortRole::Input, in);
  PortValue out = PortValue::single(apply(in.items[0]));
  batch.visit(*this, PortRole::Output, out);
  return out.items[0];
}

std::pair<at::Tensor, at::Tensor> RMSNorm::forward(const at::Tensor& x, const at::Tensor& residual,
                                                   const ForwardBatch& batch) const {
  PortValue in = PortValue::pair(x, residual);
  batch.visit(*this, PortRole::Input, in);
  PortValue out;
#ifdef SHARDSCOPE_WITH_CUDA_KERNELS
  // The residual add and the norm in one pass over the row (vLLM's fused_add_rms_norm).
  if (fused::usable(in.items[0], weight_) && fused::usable(in.items[1], weight_) &&
      in.items[0].sizes() == in.items[1].sizes()) {
    auto [normed, sum] = fused::addRmsNorm(in.items[0], in.items[1], weight_, eps_);
    out = PortValue::pair(normed, sum);
  }
#endif
  if (out.items.empty()) {
    at::Tensor sum = in.items[0] + in.items[1];
    out = PortValue::pair(apply(sum), sum);
  }
  batch.visit(*this, PortRole::Output, out);
  return {out.items[0], out.items[1]};
}

}  // namespace shardscope
