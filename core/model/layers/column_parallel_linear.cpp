#include "column_parallel_linear.h"

#include "../../error.h"
#include "../module_call.h"
#include "../weight_source.h"
#include "linear.h"

namespace shardscope {

ColumnParallelLinear::ColumnParallelLinear(std::string name, Module* parent, int64_t inFeatures,
                                           int64_t outFeatures, bool bias, TpRank tp)
    : Module(std::move(name), parent),
      in_(inFeatures),
      outPerRank_(outFeatures / tp.size),
      hasBias_(bias),
      tp_(tp) {
  SS_ASSERT(outFeatures % tp.size == 0, path() + ": output features not divisible by tp");
  setPorts(ShardSpec::whole(), ShardSpec::split(ShardKind::Column));
}

void ColumnParallelLinear::setShard(at::Tensor weight, at::Tensor bias,
                                    std::vector<int64_t> fullShape) {
  weight_ = std::move(weight);
  bias_ = std::move(bias);
  addParameter({"weight", weight_, fullShape, 0, replicas_});
  if (bias_.defined()) addParameter({"bias", bias_, {fullShape[0]}, 0, replicas_});
}

void ColumnParallelLinear::load(LoadContext& ctx, const std::string& prefix) {
  const int64_t out = outPerRank_ * tp_.size;
  const auto slice = SliceSpec::along(0, tp_.rank * outPerRank_, outPerRank_);
  at::Tensor w = ctx.load(prefix + ".weight", {out, in_}, slice);
  at::Tensor b;
  if (hasBias_) b = ctx.load(prefix + ".bias", {out}, slice);
  setShard(w, b, {out, in_});
}

at::Tensor ColumnParallelLinear::forward(const at::Tensor& x, const ForwardBatch& batch) const {
  PortValue in = PortValue::single(x);
  batch.visit(*this, PortRole::Input, in);
  at::Tensor y = linearForward(in.items[0], weight_, bias_);
  PortValue out = PortValue::pair(y, at::Tensor());
  batch.visit(*this, PortRole::Output, out);
  return out.items[0];
}

MergedColumnParallelLinear::MergedColumnParallelLinear(std::string name, Module* parent,
                                                       int64_t inFeatures, int64_t outEach,
                                                       std::vector<std::string> parts, bool bias,
                                                       TpRank tp)
    : ColumnParallelLinear(std::move(name), parent, inFeatures, outEach * int64_t(parts.size()),
                           bias, tp),
      outEach_(outEach),
      parts_(std::move(parts)) {
  setPorts(ShardSpec::whole(),
           ShardSpec::fused(std::vector<int64_t>(parts_.size(), outEach_ / tp.size)));
}

void MergedColumnParallelLinear::load(LoadContext& ctx, const std::string& prefix) {
  const int64_t each = outEach_ / tp_.size;
  const auto slice = SliceSpec::along(0, tp_.rank * each, each);
  std::vector<at::Tensor> ws, bs;
  for (const auto& part : parts_) {
    const std::string p = prefix + "." + part;
    ws.push_back(ctx.load(p + ".weight", {outEach_, in_}, slice));
    if (hasBias_) bs.push_back(ctx.load(p + ".bias", {outEach_}, slice));
  }
  setShard(at::cat(ws, 0), hasBias_ ? at::cat(bs, 0) : at::Tensor(),
           {outEach_ * int64_t(parts_.size()), in_});
}

QKVParallelLinear::QKVParallelLinear(std::string name, Module* parent, int64_t hidden,
                                     int64_t headDim, int64_t numHeads, int64_t numKvHeads,
                                     bool bias, TpRank tp)
    : ColumnParallelLinear(std::move(name), parent, hidden,
                           (numHeads + std::max<int64_t>(numKvHeads, tp.size) * 2) * headDim, bias,
                           tp),
      layout_(numHeads, numKvHeads, headDim, tp.size) {
  const int64_t q = layout_.qHeadsPerRank() * headDim, kv = layout_.kvHeadsPerRank() * headDim;
  setPorts(ShardSpec::whole(), ShardSpec::fused({q, kv, kv}));
  addHeadMethod("q_head", HeadPart::Query);
  addHeadMethod("k_head", HeadPart::Key);
  addHeadMethod("v_head", HeadPart::Value);
}

void QKVParallelLinear::addHeadMethod(const char* name, HeadPart part) {
  const std::string usage = std::string(name) + "(qkv_output, head)";
  addMethod({name, usage, [this, name, part](const ModuleCall& call) {
               const at::Tensor& out = call.tensor(0, "the qkv_proj output");
               const int64_t h = call.integer(1, "head");
               if (out.dim() == 0 || out.size(-1) != layout_.gatheredQkvColumns()) {
                 throw ModuleCallError(
                     call.callee() + "(): expected the gathered qkv_proj output with " +
                     std::to_string(layout_.gatheredQkvColumns()) + " columns, got " +
                     (out.dim() == 0 ? std::string("a scalar") : std::to_string(out.size(-1))));
               }
               if (!layout_.contains(part, h)) {
                 throw ModuleCallError(std::string(1, name[0]) + " head " + std::to_string(h) +
                                       " out of range [0, " +
                                       std::to_string(layout_.numHeads(part)) + ")");
               }
               const HeadColumns c = layout_.qkvColumns(part, h);
               return std::vector<at::Tensor>{out.narrow(-1, c.start, c.size)};
             }});
}

void QKVParallelLinear::load(LoadContext& ctx, const std::string& prefix) {
  const int64_t headDim = layout_.headDim();
  const int64_t q = layout_.numHeads(HeadPart::Query) * headDim;
  const int64_t kv = layout_.numHeads(HeadPart::Key) * headDim;
  const int64_t qPerRank = layout_.qHeadsPerRank() * headDim;
  const auto qSlice = SliceSpec::along(0, tp_.rank * qPerRank, qPerRank);
  const int64_t kvPerRank = layout_.kvHeadsPerRank() * headDim;
  const auto kvSlice = SliceSpec::along(0, layout_.firstKvHeadOf(tp_.rank) * headDim, kvPerRank);
  const auto get = [&](const char* proj, const char* what, std::vector<int64_t> shape,
                       const SliceSpec& s) {
    return ctx.load(prefix + "." + proj + "." + what, shape, s);
  };
  at::Tensor w = at::cat(
      {get("q_proj", "weight", {q, in_}, qSlice), get("k_proj", "weight", {kv, in_}, kvSlice),
       get("v_proj", "weight", {kv, in_}, kvSlice)},
      0);
  at::Tensor b;
  if (hasBias_) {
    b = at::cat({get("q_proj", "bias", {q}, qSlice), get("k_proj", "bias", {kv}, kvSlice),
                 get("v_proj", "bias", {kv}, kvSlice)},
                0);
  }
  setShard(w, b, {q + 2 * kv, in_});
}

}  // namespace shardscope
