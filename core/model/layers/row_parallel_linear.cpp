#include "row_parallel_linear.h"

#include "../../error.h"
#include "../../parallel/collective_board.h"
#include "../module_call.h"
#include "../weight_source.h"
#include "linear.h"

namespace shardscope {

RowParallelLinear::RowParallelLinear(std::string name, Module* parent, int64_t inFeatures,
                                     int64_t outFeatures, bool bias, TpRank tp, bool reduceResults)
    : Module(std::move(name), parent),
      inPerRank_(inFeatures / tp.size),
      out_(outFeatures),
      hasBias_(bias),
      reduce_(reduceResults),
      tp_(tp) {
  SS_ASSERT(inFeatures % tp.size == 0, path() + ": input features not divisible by tp");
  SS_ASSERT(reduce_ || !bias, path() + ": a bias needs the reduce (it is added once, after it)");
  setPorts(ShardSpec::split(ShardKind::RowInput),
           reduce_ ? ShardSpec::whole() : ShardSpec::partialSum());
}

void RowParallelLinear::declareInputHeads(int64_t numHeads, int64_t headDim) {
  addMethod({"head", "head(input, head)", [numHeads, headDim](const ModuleCall& call) {
               const at::Tensor& z = call.tensor(0, "the gathered input");
               const int64_t h = call.integer(1, "head");
               if (h < 0 || h >= numHeads) {
                 throw ModuleCallError("head " + std::to_string(h) + " out of range [0, " +
                                       std::to_string(numHeads) + ")");
               }
               return std::vector<at::Tensor>{z.narrow(-1, h * headDim, headDim)};
             }});
}

void RowParallelLinear::load(LoadContext& ctx, const std::string& prefix) {
  const int64_t in = inPerRank_ * tp_.size;
  weight_ = ctx.load(prefix + ".weight", {out_, in},
                     SliceSpec::along(1, tp_.rank * inPerRank_, inPerRank_));
  addParameter({"weight", weight_, {out_, in}, 1});
  if (hasBias_) {
    bias_ = ctx.load(prefix + ".bias", {out_}, SliceSpec::whole());
    addParameter({"bias", bias_, {out_}, -1});
  }
}

at::Tensor RowParallelLinear::forward(const at::Tensor& x, const ForwardBatch& batch) const {
  PortValue in = PortValue::single(x);
  batch.visit(*this, PortRole::Input, in);
  at::Tensor y = linearForward(in.items[0], weight_);
  if (reduce_) {
    CollectiveSite site(path(), batch.step);
    batch.group.allReduceSum(y);
  }
  if (bias_.defined()) y.add_(bias_);
  PortValue out = PortValue::pair(y, at::Tensor());
  batch.visit(*this, PortRole::Output, out);
  return out.items[0];
}

}  // namespace shardscope
