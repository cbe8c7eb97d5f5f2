#include "row_parallel_linear.h"

#include "../../error.h"
#include "../../parallel/collective_board.h"
#include "../weight_source.h"
#include "linear.h"

namespace shardscope {

RowParallelLinear::RowParallelLinear(std::string name, Module* parent, int64_t inFeatures,
                                     int64_t outFeatures, bool bias, TpRank tp)
    : Module(std::move(name), parent),
      inPerRank_(inFeatures / tp.size),
      out_(outFeatures),
      hasBias_(bias),
      tp_(tp) {
  SS_ASSERT(inFeatures % tp.size == 0, path() + ": input features not divisible by tp");
  setPorts({"", ShardKind::RowInput, -1}, {"", ShardKind::Whole});
}

void RowParallelLinear::load(LoadContext& ctx, const std::string& prefix) {
  const int64_t in = inPerRank_ * tp_.size;
  weight_ = ctx.source
                .load(prefix + ".weight", {out_, in},
                      SliceSpec::along(1, tp_.rank * inPerRank_, inPerRank_), ctx.dtype)
                .to(ctx.device);
  addParameter({"weight", weight_, {out_, in}, 1});
  if (hasBias_) {
    bias_ = ctx.source.load(prefix + ".bias", {out_}, SliceSpec::whole(), ctx.dtype).to(ctx.device);
    addParameter({"bias", bias_, {out_}, -1});
  }
}

at::Tensor RowParallelLinear::forward(const at::Tensor& x, const ForwardBatch& batch) const {
  PortValue in = PortValue::single(x);
  batch.visit(*this, PortRole::Input, in);
  at::Tensor y = linearForward(in.items[0], weight_);
  {
    CollectiveSite site(path(), batch.step);
    batch.group.allReduceSum(y);
  }
  if (bias_.defined()) y.add_(bias_);
  PortValue out = PortValue::pair(y, at::Tensor());
  batch.visit(*this, PortRole::Output, out);
  return out.items[0];
}

}  // namespace shardscope
