#include "deepseek_v2.h"

#include "../../parallel/collective_board.h"
#include "../layer_replayer.h"
#include "../layers/dcp_group_column_parallel_linear.h"
#include "../weight_source.h"

namespace shardscope {

namespace {
std::string hfLayer(int64_t layer) {
  return "model.layers." + std::to_string(layer);
}

}  // namespace

DeepseekV2MLAAttention::DeepseekV2MLAAttention(Module* parent, const ModelConfig& c, int64_t layer,
                                               TpRank tp)
    : Module("self_attn", parent), mla_(c.mla), tp_(tp) {
  const int64_t H = c.hiddenSize, qk = mla_.qkHeadDim(), nope = mla_.qkNopeHeadDim;
  const int64_t out = c.numHeads * qk;
  const auto query = [&](const char* name, int64_t in) -> ColumnParallelLinear* {
    if (tp.dcp > 1) return child<DCPGroupColumnParallelLinear>(name, this, in, out, false, tp);
    return child<ColumnParallelLinear>(name, this, in, out, false, tp);
  };
  if (mla_.qLoraRank == 0) {
    qProj = query("q_proj", H);
  } else {
    qAProj = child<ReplicatedLinear>("q_a_proj", this, H, mla_.qLoraRank);
    qALayernorm = child<RMSNorm>("q_a_layernorm", this, mla_.qLoraRank, c.rmsNormEps);
    qBProj = query("q_b_proj", mla_.qLoraRank);
  }
  kvAProjWithMqa =
      child<ReplicatedLinear>("kv_a_proj_with_mqa", this, H, mla_.kvLoraRank + mla_.qkRopeHeadDim);
  kvALayernorm = child<RMSNorm>("kv_a_layernorm", this, mla_.kvLoraRank, c.rmsNormEps);
  kvBProj = child<ColumnParallelLinear>("kv_b_proj", this, mla_.kvLoraRank,
                                        c.numHeads * (nope + mla_.vHeadDim), false, tp);
  rotaryEmb = child<DeepseekScalingRotaryEmbedding>("rotary_emb", this, c,
                                                    ShardSpec::split(ShardKind::Head, 1, tp.dcp));
  mlaAttn = child<MLAAttention>("mla_attn", this, layer, c, tp);
  oProj = child<RowParallelLinear>("o_proj", this, c.numHeads * mla_.vHeadDim, H, false, tp);
  oProj->declareInputHeads(c.numHeads, mla_.vHeadDim);
}

void DeepseekV2MLAAttention::load(LoadContext& ctx, const std::string& hf) {
  if (qProj) {
    qProj->load(ctx, hf + ".q_proj");
  } else {
    qAProj->load(ctx, hf + ".q_a_proj");
    qALayernorm->load(ctx, hf + ".q_a_layernorm.weight");
    qBProj->load(ctx, hf + ".q_b_proj");
  }
  kvAProjWithMqa->load(ctx, hf + ".kv_a_proj_with_mqa");
  kvALayernorm->load(ctx, hf + ".kv_a_layernorm.weight");
  kvBProj->load(ctx, hf + ".kv_b_proj");
  rotaryEmb->to(ctx.device);
  oProj->load(ctx, hf + ".o_proj");
  if (tp_.dcp > 1) {
    // The group attends with all its query heads over this rank's tokens: their expansion rows.
    const int64_t perHead = mla_.qkNopeHeadDim + mla_.vHeadDim;
    const int64_t rows = mlaAttn->groupHeads() * perHead;
    const int64_t all = kvBProj->outPerRank() * tp_.size;
    kvBGroup_ = ctx.load(hf + ".kv_b_proj.weight", {all, mla_.kvLoraRank},
                         SliceSpec::along(0, (tp_.rank / tp_.dcp) * rows, rows));
  }
}

at::Tensor DeepseekV2MLAAttention::groupExpansion() const {
  return tp_.dcp > 1 ? kvBGroup_ : kvBProj->parameter("weight")->shard;
}

at::Tensor DeepseekV2MLAAttention::forward(const at::Tensor& positions, const at::Tensor& x,
                                           const ForwardBatch& b) const {
  PortValue in = PortValue::single(x);
  b.visit(*this, PortRole::Input, in);
  const at::Tensor& h = in.items[0];
  const int64_t T = h.size(0), nope = mla_.qkNopeHeadDim, rope = mla_.qkRopeHeadDim;
  const int64_t kvLora = mla_.kvLoraRank;
  at::Tensor q = qProj ? qProj->forward(h, b)
                       : qBProj->forward(qALayernorm->forward(qAProj->forward(h, b), b), b);
  q = q.reshape({T, -1, mla_.qkHeadDim()});              // [T, groupHeads, nope + rope]
  const at::Tensor kvA = kvAProjWithMqa->forward(h, b);  // [T, kv_lora + rope]
  const at::Tensor latent = kvALayernorm->forward(kvA.narrow(-1, 0, kvLora).contiguous(), b);
  // An unobserved decode step folds kv_b_proj into the attention (latent space); otherwise it
  // runs here, before rotary_emb, in the order its ports are visited.
  const bool absorbed = MLAAttention::absorbs(b);
  const at::Tensor kv = absorbed ? at::Tensor() : kvBProj->forward(latent, b);  // [T, h/tp*(n+v)]
  auto [qPe, kPe] = rotaryEmb->forward(positions, q.narrow(-1, nope, rope).contiguous(),
                                       kvA.narrow(-1, kvLora, rope).reshape({T, 1, rope}), b);
  const at::Tensor query = at::cat({q.narrow(-1, 0, nope), qPe}, -1);
  const at::Tensor kPeRows = kPe.reshape({T, rope});
  const at::Tensor o = absorbed
                           ? mlaAttn->forwardAbsorbed(query, latent, kPeRows, groupExpansion(), b)
                           : mlaAttn->forward(query, latent, kPeRows, kv, groupExpansion(), b);
  PortValue out = PortValue::single(oProj->forward(o, b));
  b.visit(*this, PortRole::Output, out);
  return out.items[0];
}

DeepseekV2MoE::DeepseekV2MoE(Module* parent, const ModelConfig& c, TpRank tp)
    : FeedForward("mlp", parent) {
  gate = child<ReplicatedLinear>("gate", this, c.hiddenSize, c.moe.numExperts);
  experts = child<FusedMoE>("experts", this, c, tp);
  if (c.moe.numSharedExperts > 0) {
    sharedExperts = child<DecoderMLP>("shared_experts", this, c.hiddenSize,
                                      c.moe.intermediateSize * c.moe.numSharedExperts, tp, false);
  }
}

void DeepseekV2MoE::load(LoadContext& ctx, const std::string& hf) {
  gate->load(ctx, hf + ".gate");
  experts->load(ctx, hf + ".experts");
  if (sharedExperts) sharedExperts->load(ctx, hf + ".shared_experts");
}

at::Tensor DeepseekV2MoE::forward(const at::Tensor& x, const ForwardBatch& b) const {
  PortValue in = PortValue::single(x);
  b.visit(*this, PortRole::Input, in);
  const at::Tensor routerLogits = gate->forward(in.items[0], b);
  at::Tensor y = experts->forward(in.items[0], routerLogits, b);
  if (sharedExperts) y = y + sharedExperts->forward(in.items[0], b);  // both partial sums
  {
    CollectiveSite site(experts->path(), b.step);
    b.group.allReduceSum(y);
  }
  PortValue out = PortValue::single(y);
  b.visit(*this, PortRole::Output, out);
  return out.items[0];
}

DeepseekV2DecoderLayer::DeepseekV2DecoderLayer(Module* parent, const ModelConfig& c, int64_t layer,
                                               TpRank tp)
    : Module("layers", parent, layer), layer_(layer) {
  setLayer(layer);
  inputLayernorm = child<RMSNorm>("input_layernorm", this, c.hiddenSize, c.rmsNormEps);
  selfAttn = child<DeepseekV2MLAAttention>(this, c, layer, tp);
  postAttentionLayernorm =
      child<RMSNorm>("post_attention_layernorm", this, c.hiddenSize, c.rmsNormEps);
  if (c.isSparseLayer(layer)) {
    mlp = child<DeepseekV2MoE>(this, c, tp);
  } else {
    mlp = child<DecoderMLP>(this, c, tp);
  }
}

void DeepseekV2DecoderLayer::load(LoadContext& ctx) {
  const std::string hf = hfLayer(layer_);
  inputLayernorm->load(ctx, hf + ".input_layernorm.weight");
  selfAttn->load(ctx, hf + ".self_attn");
  postAttentionLayernorm->load(ctx, hf + ".post_attention_layernorm.weight");
  mlp->load(ctx, hf + ".mlp");
}

std::pair<at::Tensor, at::Tensor> DeepseekV2DecoderLayer::forward(const at::Tensor& positions,
                                                                  const at::Tensor& hidden,
                                                                  const at::Tensor& residual,
                                                                  const ForwardBatch& b) const {
  PortValue in = PortValue::single(hidden);
  b.visit(*this, PortRole::Input, in);
  at::Tensor h, r;
  if (!residual.defined()) {  // layer 0: the norm sees the embeddings alone
    r = in.items[0];
    h = inputLayernorm->forward(in.items[0], b);
  } else {
    std::tie(h, r) = inputLayernorm->forward(in.items[0], residual, b);
  }
  h = selfAttn->forward(positions, h, b);
  std::tie(h, r) = postAttentionLayernorm->forward(h, r, b);
  h = mlp->forward(h, b);
  PortValue out = PortValue::pair(h, r);
  b.visit(*this, PortRole::Output, out);
  return {out.items[0], out.items[1]};
}

DeepseekV2Model::DeepseekV2Model(Module* parent, const ModelConfig& c, TpRank tp)
    : Module("model", parent) {
  embedTokens = child<VocabParallelEmbedding>("embed_tokens", this, c.vocabSize, c.hiddenSize, tp);
  layerList = child<ModuleList>("layers", this);
  for (int64_t i = 0; i < c.numLayers; ++i)
    layers.push_back(child<DeepseekV2DecoderLayer>(layerList, c, i, tp));
  norm = child<RMSNorm>("norm", this, c.hiddenSize, c.rmsNormEps);
}

void DeepseekV2Model::load(LoadContext& ctx) {
  embedTokens->load(ctx, "model.embed_tokens.weight");
  for (DeepseekV2DecoderLayer* l : layers) l->load(ctx);
  norm->load(ctx, "model.norm.weight");
}

at::Tensor DeepseekV2Model::forward(const at::Tensor& ids, const ForwardBatch& b) const {
  PortValue in = PortValue::single(ids);
  b.visit(*this, PortRole::Input, in);
  at::Tensor h = embedTokens->forward(in.items[0], b), r;
  for (int64_t i = 0; i < numLayers();) {
    // Steps of up to kMaxRecordedTokens replay graphs over the layers nobody observes.
    if (b.replayer) i = b.replayer->replay(*this, i, h, r, b);
    if (i == numLayers()) break;
    if (b.failure) applyFailureInjection(*b.failure, i, b, h);
    runLayer(i++, h, r, b);
  }
  at::Tensor normed = r.defined() ? norm->forward(h, r, b).first : norm->forward(h, b);
  PortValue out = PortValue::single(normed);
  b.visit(*this, PortRole::Output, out);
  return out.items[0];
}

void DeepseekV2Model::runLayer(int64_t i, at::Tensor& hidden, at::Tensor& residual,
                               const ForwardBatch& b) const {
  std::tie(hidden, residual) = layers[size_t(i)]->forward(b.positions, hidden, residual, b);
}

DeepseekV2ForCausalLM::DeepseekV2ForCausalLM(const ModelConfig& c, TpRank tp)
    : CausalLM("model", nullptr), config_(c), tp_(tp), stage_{PipelineStages(c.numLayers, 1), 0} {
  c.checkTensorParallel(tp.size, tp.expertParallel, tp.dcp);
  model = child<DeepseekV2Model>(this, c, tp);
  lmHead = child<ParallelLMHead>("lm_head", this, c.vocabSize, c.hiddenSize, tp);
  logitsProcessor = child<LogitsProcessor>("logits_processor", this, c.vocabSize);
  logitsPort_ = child<StepPort>("logits", this, "Logits");
  samplesPort_ = child<StepPort>("samples", this, "Samples");
  // The latent-space decode and the expanded prefill keep every decision on the device or in the
  // step's layout; the MoE layers record where the fused kernels route on the device.
  graphCapturable_ = !c.hasSparseLayers() || FusedMoE::recordable(c, tp, kMaxRecordedTokens);
}

KvCacheLayout DeepseekV2ForCausalLM::kvCacheLayout() const {
  return {1, config_.mla.kvLoraRank + config_.mla.qkRopeHeadDim, 1, tp_.dcp};
}

void DeepseekV2ForCausalLM::load(LoadContext& ctx) {
  model->load(ctx);
  if (config_.tieWordEmbeddings) {
    lmHead->tie(*model->embedTokens);
    ctx.source.ignore("lm_head.weight");
  } else {
    lmHead->load(ctx, "lm_head.weight");
  }
}

at::Tensor DeepseekV2ForCausalLM::forwardStage(const at::Tensor& ids, StageCarry&,
                                               const ForwardBatch& b) const {
  PortValue in = PortValue::single(ids);
  b.visit(*this, PortRole::Input, in);
  PortValue out = PortValue::single(model->forward(in.items[0], b));
  b.visit(*this, PortRole::Output, out);
  return out.items[0];
}

int DeepseekV2ForCausalLM::portStage(const Module& m, PortRole) const {
  return &m == samplesPort_ || &m == model->layerList ? kEveryStage : 0;
}

at::Tensor DeepseekV2ForCausalLM::logits(const at::Tensor& hidden, const ForwardBatch& b) const {
  return logitsProcessor->forward(*lmHead, hidden, b);
}

}  // namespace shardscope
