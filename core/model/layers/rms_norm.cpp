#include "rms_norm.h"

#include <torch/version.h>

#include "../weight_source.h"

namespace shardscope {

RMSNorm::RMSNorm(std::string name, Module* parent, int64_t dim, double eps, ShardKind portKind,
                 int64_t splitDim)
    : Module(std::move(name), parent), dim_(dim), eps_(eps) {
  setPorts({"", portKind, splitDim}, {"", portKind, splitDim});
}

void RMSNorm::load(LoadContext& ctx, const std::string& hfName) {
  weight_ = ctx.source.load(hfName, {dim_}, SliceSpec::whole(), ctx.dtype).to(ctx.device);
  addParameter({"weight", weight_, {dim_}, -1});
}

at::Tensor RMSNorm::apply(const at::Tensor& x) const {
#if TORCH_VERSION_MAJOR >= 2 && TORCH_VERSION_MINOR >= 6 || TORCH_VERSION_MAJOR >= 3
  // On the GPU one fused kernel (fp32 inside) instead of eight launches; it rounds once where
  // Hugging Face rounds twice (before and after the weight), a bf16 ulp at most.
  if (x.is_cuda()) return at::rms_norm(x, {dim_}, weight_, eps_);
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
  at::Tensor sum = in.items[0] + in.items[1];
  PortValue out = PortValue::pair(apply(sum), sum);
  batch.visit(*this, PortRole::Output, out);
  return {out.items[0], out.items[1]};
}

}  // namespace shardscope
