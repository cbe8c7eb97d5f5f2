#include "vocab_parallel_embedding.h"

#include "../../parallel/collective_board.h"
#include "../module_call.h"
#include "../weight_source.h"
#include "linear.h"

namespace shardscope {

int64_t paddedVocab(int64_t vocab) {
  return (vocab + kVocabPadding - 1) / kVocabPadding * kVocabPadding;
}

VocabParallelEmbedding::VocabParallelEmbedding(std::string name, Module* parent, int64_t vocab,
                                               int64_t hidden, TpRank tp)
    : Module(std::move(name), parent),
      vocab_(vocab),
      hidden_(hidden),
      perRank_(paddedVocab(vocab) / tp.size),
      tp_(tp) {
  setPorts(ShardSpec::whole(), ShardSpec::whole());
}

at::Tensor VocabParallelEmbedding::loadShard(LoadContext& ctx, const std::string& hfName) {
  const int64_t start = tp_.rank * perRank_;
  const int64_t real = std::clamp<int64_t>(vocab_ - start, 0, perRank_);  // rows before the padding
  if (real == perRank_) {  // no padding rows in this shard: keep the loaded slice as it is
    return ctx.load(hfName, {vocab_, hidden_}, SliceSpec::along(0, start, real));
  }
  at::Tensor shard =
      at::zeros({perRank_, hidden_}, at::TensorOptions().dtype(ctx.dtype).device(ctx.device));
  if (real > 0) {
    shard.narrow(0, 0, real)
        .copy_(ctx.load(hfName, {vocab_, hidden_}, SliceSpec::along(0, start, real)));
  } else {
    ctx.source.ignore(hfName);
  }
  return shard;
}

void VocabParallelEmbedding::load(LoadContext& ctx, const std::string& hfName) {
  weight_ = loadShard(ctx, hfName);
  addParameter({"weight", weight_, {vocab_, hidden_}, 0});
}

at::Tensor VocabParallelEmbedding::forward(const at::Tensor& ids, const ForwardBatch& batch) const {
  PortValue in = PortValue::single(ids);
  batch.visit(*this, PortRole::Input, in);
  at::Tensor out;
  if (tp_.size == 1) {
    out = at::embedding(weight_, in.items[0]);
  } else {
    const int64_t start = tp_.rank * perRank_;
    at::Tensor local = in.items[0] - start;
    at::Tensor mine = (local >= 0) & (local < perRank_);
    out = at::embedding(weight_, at::where(mine, local, at::zeros_like(local)));
    out.mul_(mine.unsqueeze(-1).to(out.scalar_type()));
    CollectiveSite site(path(), batch.step);
    batch.group.allReduceSum(out);
  }
  PortValue result = PortValue::single(out);
  batch.visit(*this, PortRole::Output, result);
  return result.items[0];
}

void ParallelLMHead::tie(const VocabParallelEmbedding& embedding) {
  weight_ = embedding.weight();
  addParameter({"weight", weight_, {vocab_, hidden_}, 0});
}

LogitsProcessor::LogitsProcessor(std::string name, Module* parent, int64_t vocab)
    : Module(std::move(name), parent), vocab_(vocab) {
  setPorts(ShardSpec::whole(), ShardSpec::whole(), true);
}

std::vector<at::Tensor> LogitsProcessor::callWhole(const ModuleCall& call) const {
  const auto* head = dynamic_cast<const ParallelLMHead*>(call.moduleAt(0));
  if (!head) throw ModuleCallError("call it as model.logits_processor(model.lm_head, h)");
  const at::Tensor& h = call.tensor(1, "h");
  const bool vec = h.dim() == 1;
  const ForwardBatch& b = call.batch();
  at::Tensor out = forward(*head, vec ? h.unsqueeze(0) : h, b);
  return {vec ? out.squeeze(0) : out};
}

at::Tensor LogitsProcessor::forward(const ParallelLMHead& head, const at::Tensor& hidden,
                                    const ForwardBatch& batch) const {
  PortValue in = PortValue::single(hidden);
  batch.visit(*this, PortRole::Input, in);
  at::Tensor local = linearForward(in.items[0], head.weight());  // [R, Vp/tp]
  CollectiveSite site(path(), batch.step);
  at::Tensor logits = batch.group.allGather(local, -1).narrow(-1, 0, vocab_);
  PortValue out = PortValue::single(logits);
  batch.visit(*this, PortRole::Output, out);
  return out.items[0];
}

}  // namespace shardscope
