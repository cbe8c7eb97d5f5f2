#include "replicated_linear.h"

#include "../weight_source.h"
#include "linear.h"

namespace shardscope {

ReplicatedLinear::ReplicatedLinear(std::string name, Module* parent, int64_t inFeatures,
                                   int64_t outFeatures)
    : Module(std::move(name), parent), in_(inFeatures), out_(outFeatures) {
  setPorts(ShardSpec::whole(), ShardSpec::whole());
}

void ReplicatedLinear::load(LoadContext& ctx, const std::string& prefix) {
  weight_ = ctx.load(prefix + ".weight", {out_, in_}, SliceSpec::whole());
  addParameter({"weight", weight_, {out_, in_}, -1});
}

at::Tensor ReplicatedLinear::forward(const at::Tensor& x, const ForwardBatch& batch) const {
  PortValue in = PortValue::single(x);
  batch.visit(*this, PortRole::Input, in);
  PortValue out = PortValue::pair(linearForward(in.items[0], weight_), at::Tensor());
  batch.visit(*this, PortRole::Output, out);
  return out.items[0];
}

}  // namespace shardscope
