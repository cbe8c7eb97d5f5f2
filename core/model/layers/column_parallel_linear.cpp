#include "column_parallel_linear.h"

#include "../../error.h"
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
  setPorts({"", ShardKind::Whole}, {"", ShardKind::Column, -1});
}

void ColumnParallelLinear::setShard(at::Tensor weight, at::Tensor bias,
                                    std::vector<int64_t> fullShape) {
  weight_ = std::move(weight);
  bias_ = std::move(bias);
  addParameter({"weight", weight_, fullShape, 0});
  if (bias_.defined()) addParameter({"bias", bias_, {fullShape[0]}, 0});
}

void ColumnParallelLinear::load(LoadContext& ctx, const std::string& prefix) {
  const int64_t out = outPerRank_ * tp_.size;
  const auto slice = SliceSpec::along(0, tp_.rank * outPerRank_, outPerRank_);
  at::Tensor w = ctx.source.load(prefix + ".weight", {out, in_}, slice, ctx.dtype).to(ctx.device);
  at::Tensor b;
  if (hasBias_) b = ctx.source.load(prefix + ".bias", {out}, slice, ctx.dtype).to(ctx.device);
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
  setPorts({"", ShardKind::Whole}, {"", ShardKind::FusedColumn, -1});
}

void MergedColumnParallelLinear::load(LoadContext& ctx, const std::string& prefix) {
  const int64_t each = outEach_ / tp_.size;
  const auto slice = SliceSpec::along(0, tp_.rank * each, each);
  std::vector<at::Tensor> ws, bs;
  for (const auto& part : parts_) {
    const std::string p = prefix + "." + part;
    ws.push_back(ctx.source.load(p + ".weight", {outEach_, in_}, slice, ctx.dtype));
    if (hasBias_) bs.push_back(ctx.source.load(p + ".bias", {outEach_}, slice, ctx.dtype));
  }
  setShard(at::cat(ws, 0).to(ctx.device), hasBias_ ? at::cat(bs, 0).to(ctx.device) : at::Tensor(),
           {outEach_ * int64_t(parts_.size()), in_});
}

QKVParallelLinear::QKVParallelLinear(std::string name, Module* parent, int64_t hidden,
                                     int64_t headDim, int64_t numHeads, int64_t numKvHeads,
                                     bool bias, TpRank tp)
    : ColumnParallelLinear(std::move(name), parent, hidden,
                           (numHeads + std::max<int64_t>(numKvHeads, tp.size) * 2) * headDim, bias,
                           tp),
      headDim_(headDim),
      numHeads_(numHeads),
      numKvHeads_(numKvHeads),
      qHeads_(numHeads / tp.size),
      kvHeads_(std::max<int64_t>(numKvHeads / tp.size, 1)),
      kvReplicas_(tp.size > numKvHeads ? int(tp.size / numKvHeads) : 1) {
  setPorts({"", ShardKind::Whole}, {"", ShardKind::FusedColumn, -1});
}

void QKVParallelLinear::load(LoadContext& ctx, const std::string& prefix) {
  const int64_t q = numHeads_ * headDim_, kv = numKvHeads_ * headDim_;
  const auto qSlice = SliceSpec::along(0, tp_.rank * qHeads_ * headDim_, qHeads_ * headDim_);
  const int64_t kvHead0 = (tp_.rank / kvReplicas_) * kvHeads_;
  const auto kvSlice = SliceSpec::along(0, kvHead0 * headDim_, kvHeads_ * headDim_);
  const auto get = [&](const char* proj, const char* what, std::vector<int64_t> shape,
                       const SliceSpec& s) {
    return ctx.source.load(prefix + "." + proj + "." + what, shape, s, ctx.dtype);
  };
  at::Tensor w = at::cat(
      {get("q_proj", "weight", {q, in_}, qSlice), get("k_proj", "weight", {kv, in_}, kvSlice),
       get("v_proj", "weight", {kv, in_}, kvSlice)},
      0);
  at::Tensor b;
  if (hasBias_) {
    b = at::cat({get("q_proj", "bias", {q}, qSlice), get("k_proj", "bias", {kv}, kvSlice),
                 get("v_proj", "bias", {kv}, kvSlice)},
                0)
            .to(ctx.device);
  }
  setShard(w.to(ctx.device), b, {q + 2 * kv, in_});
}

}  // namespace shardscope
