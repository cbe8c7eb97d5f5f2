#include "dense_decoder.h"

#include "../../error.h"
#include "../layer_replayer.h"
#include "../module_call.h"
#include "../weight_source.h"
#include "qwen3_moe.h"
#ifdef SHARDSCOPE_WITH_CUDA_KERNELS
#include "../../kernels/fused_ops.h"
#endif

namespace shardscope {

namespace {
std::string hfLayer(int64_t layer) {
  return "model.layers." + std::to_string(layer);
}
}  // namespace

DecoderAttention::DecoderAttention(Module* parent, const ModelConfig& c, int64_t layer, TpRank tp)
    : Module("self_attn", parent), headDim_(c.headDim) {
  qkvProj = child<QKVParallelLinear>("qkv_proj", this, c.hiddenSize, c.headDim, c.numHeads,
                                     c.numKvHeads, c.qkvBias, tp);
  if (c.qkNorm) {
    // [T, heads, d]; a KV head replicated on several ranks is read once.
    qNorm = child<RMSNorm>("q_norm", this, c.headDim, c.rmsNormEps,
                           ShardSpec::split(ShardKind::Head, 1));
    kNorm = child<RMSNorm>("k_norm", this, c.headDim, c.rmsNormEps,
                           ShardSpec::split(ShardKind::Head, 1, qkvProj->kvReplicas()));
  }
  rotaryEmb = child<RotaryEmbedding>("rotary_emb", this, c);
  attn = child<Attention>("attn", this, layer, qkvProj->headsPerRank(), qkvProj->kvHeadsPerRank(),
                          c.headDim);
  oProj = child<RowParallelLinear>("o_proj", this, c.numHeads * c.headDim, c.hiddenSize, false, tp);
  oProj->declareInputHeads(c.numHeads, c.headDim);
  qSize_ = qkvProj->headsPerRank() * c.headDim;
  kvSize_ = qkvProj->kvHeadsPerRank() * c.headDim;
}

void DecoderAttention::load(LoadContext& ctx, const std::string& hf) {
  qkvProj->load(ctx, hf);
  if (qNorm) {
    qNorm->load(ctx, hf + ".q_norm.weight");
    kNorm->load(ctx, hf + ".k_norm.weight");
  }
  rotaryEmb->to(ctx.device);
  rotaryEmb->setActivationDtype(ctx.dtype);
  oProj->load(ctx, hf + ".o_proj");
}

at::Tensor DecoderAttention::forward(const at::Tensor& positions, const at::Tensor& x,
                                     const ForwardBatch& b) const {
  PortValue in = PortValue::single(x);
  b.visit(*this, PortRole::Input, in);
  return forwardFromQkv(positions, qkvProj->forward(in.items[0], b), b);
}

at::Tensor DecoderAttention::forwardFromQkv(const at::Tensor& positions, const at::Tensor& qkv,
                                            const ForwardBatch& b) const {
  const int64_t T = qkv.size(0);  // qkv: [T, (nq + 2 nkv) d / tp]
  at::Tensor o = fusedDecode(positions, qkv, b);
  if (!o.defined()) {
    at::Tensor q = qkv.narrow(-1, 0, qSize_);
    at::Tensor k = qkv.narrow(-1, qSize_, kvSize_);
    at::Tensor v = qkv.narrow(-1, qSize_ + kvSize_, kvSize_);
    if (qNorm) {
      q = qNorm->forward(q.reshape({T, -1, headDim_}), b).reshape({T, -1});
      k = kNorm->forward(k.reshape({T, -1, headDim_}), b).reshape({T, -1});
    }
    std::tie(q, k) = rotaryEmb->forward(positions, q, k, b);
    o = attn->forward(q, k, v.contiguous(), b);
  }
  PortValue out = PortValue::single(oProj->forward(o, b));
  b.visit(*this, PortRole::Output, out);
  return out.items[0];
}

// A decode step nobody observes (a graph being recorded, or a run without a trace): the q/k norms,
// rotary, the KV cache write and, where the keys fit one chunk, attention itself run as one
// kernel (else attention reads the cache after it), as vLLM's fused decode path does. q_norm,
// k_norm, rotary_emb and attn are not visited, which only an observer could notice; with one, the
// modules run one by one, unless it waits on none of those ports (b.fuseAttentionUnderObserver):
// then they are reported passed. Undefined when this path does not apply.
at::Tensor DecoderAttention::fusedDecode(const at::Tensor& positions, const at::Tensor& qkv,
                                         const ForwardBatch& b) const {
#if defined(SHARDSCOPE_WITH_CUDA_KERNELS) && TORCH_VERSION_MAJOR >= 2
  if ((b.observer && !b.fuseAttentionUnderObserver) || !b.decodeSlots.defined() ||
      !fused::usable(qkv, rotaryEmb->cosTable()) || !qkv.is_contiguous())
    return {};
  if (b.observer) {  // in the order the modules would have visited them
    const std::initializer_list<const Module*> skipped = {qNorm, kNorm, rotaryEmb, attn};
    for (const Module* m : skipped) {
      if (!m) continue;  // no q/k norms (Qwen2, Llama)
      b.observer->portPassed(*m, PortRole::Input, b);
      b.observer->portPassed(*m, PortRole::Output, b);
    }
  }
  const KvCache& cache = *b.spans[0].cache;
  fused::QkvToCache in;
  in.qkv = qkv;
  in.qHeads = qSize_ / headDim_;
  in.kvHeads = kvSize_ / headDim_;
  in.headDim = headDim_;
  if (qNorm) {
    in.qNorm = qNorm->weight();
    in.kNorm = kNorm->weight();
    in.eps = qNorm->eps();
  }
  in.cos = rotaryEmb->cosTable();
  in.sin = rotaryEmb->sinTable();
  in.positions = positions;
  in.slots = b.decodeSlots;
  in.keyCache = cache.allKeys(attn->layer());
  in.valueCache = cache.allValues(attn->layer());
  at::Tensor o = fused::qkvDecodeAttention(in, b.decodeSpan, attn->scale());
  return o.defined() ? o : attn->attendCached(fused::qkvToCache(in), b);
#else
  (void)positions, (void)qkv, (void)b;
  return {};
#endif
}

DecoderMLP::DecoderMLP(Module* parent, const ModelConfig& c, TpRank tp)
    : DecoderMLP("mlp", parent, c.hiddenSize, c.intermediateSize, tp, true) {}

DecoderMLP::DecoderMLP(std::string name, Module* parent, int64_t hidden, int64_t intermediate,
                       TpRank tp, bool reduceResults)
    : FeedForward(std::move(name), parent) {
  gateUpProj = child<MergedColumnParallelLinear>("gate_up_proj", this, hidden, intermediate,
                                                 std::vector<std::string>{"gate_proj", "up_proj"},
                                                 false, tp);
  actFn = child<SiluAndMul>("act_fn", this);
  downProj =
      child<RowParallelLinear>("down_proj", this, intermediate, hidden, false, tp, reduceResults);
  if (!reduceResults) setPorts(ShardSpec::whole(), ShardSpec::partialSum());
}

std::vector<at::Tensor> DecoderMLP::callWhole(const ModuleCall& call) const {
  at::Tensor y = forward(call.tensor(0, "x"), call.batch());
  if (port(PortRole::Output).shard.kind == ShardKind::PartialSum) {
    y = y.clone();  // forward may return a tensor the script also holds
    call.batch().group.allReduceSum(y);
  }
  return {y};
}

std::pair<at::Tensor, at::Tensor> DecoderMLP::forwardAfterNorm(const at::Tensor& x,
                                                               const at::Tensor& residual,
                                                               const RMSNorm& norm,
                                                               const ForwardBatch& b) const {
#ifdef SHARDSCOPE_WITH_CUDA_KERNELS
  fused::GemvInput in;
  in.x = x;
  in.residual = residual;
  in.normWeight = norm.weight();
  in.eps = norm.eps();
  in.w = gateUpProj->weight();
  in.bias = gateUpProj->bias();
  in.swiGlu = true;
  const fused::GemvOutput gateUp = fused::gemvFused(in);
  if (!gateUp.y.defined()) return {};
  return {downProj->forward(gateUp.y, b), gateUp.residualSum};
#else
  (void)x, (void)residual, (void)norm, (void)b;
  return {};
#endif
}

void DecoderMLP::load(LoadContext& ctx, const std::string& hf) {
  gateUpProj->load(ctx, hf);
  downProj->load(ctx, hf + ".down_proj");
}

at::Tensor DecoderMLP::forward(const at::Tensor& x, const ForwardBatch& b) const {
  PortValue in = PortValue::single(x);
  b.visit(*this, PortRole::Input, in);
  at::Tensor h = downProj->forward(actFn->forward(gateUpProj->forward(in.items[0], b), b), b);
  PortValue out = PortValue::single(h);
  b.visit(*this, PortRole::Output, out);
  return out.items[0];
}

DecoderLayer::DecoderLayer(Module* parent, const ModelConfig& c, int64_t layer, TpRank tp)
    : Module("layers", parent, layer), layer_(layer) {
  setLayer(layer);
  inputLayernorm = child<RMSNorm>("input_layernorm", this, c.hiddenSize, c.rmsNormEps);
  selfAttn = child<DecoderAttention>(this, c, layer, tp);
  postAttentionLayernorm =
      child<RMSNorm>("post_attention_layernorm", this, c.hiddenSize, c.rmsNormEps);
  if (c.isSparseLayer(layer)) {
    mlp = child<Qwen3MoeSparseMoeBlock>(this, c, tp);
  } else {
    mlp = child<DecoderMLP>(this, c, tp);
  }
}

void DecoderLayer::load(LoadContext& ctx) {
  const std::string hf = hfLayer(layer_);
  inputLayernorm->load(ctx, hf + ".input_layernorm.weight");
  selfAttn->load(ctx, hf + ".self_attn");
  postAttentionLayernorm->load(ctx, hf + ".post_attention_layernorm.weight");
  mlp->load(ctx, hf + ".mlp");
}

std::pair<at::Tensor, at::Tensor> DecoderLayer::forward(const at::Tensor& positions,
                                                        const at::Tensor& hidden,
                                                        const at::Tensor& residual,
                                                        const ForwardBatch& b) const {
  PortValue in = PortValue::single(hidden);
  b.visit(*this, PortRole::Input, in);
  auto [h, r] = fusedForward(positions, in.items[0], residual, b);
  if (!h.defined()) {
    if (!residual.defined()) {  // layer 0: the norm sees the embeddings alone
      r = in.items[0];
      h = inputLayernorm->forward(in.items[0], b);
    } else {
      std::tie(h, r) = inputLayernorm->forward(in.items[0], residual, b);
    }
    h = selfAttn->forward(positions, h, b);
    std::tie(h, r) = postAttentionLayernorm->forward(h, r, b);
    h = mlp->forward(h, b);
  }
  PortValue out = PortValue::pair(h, r);
  b.visit(*this, PortRole::Output, out);
  return {out.items[0], out.items[1]};
}

// A step of at most four rows that nobody observes (a graph being recorded, or a run without a
// trace): each RMSNorm runs inside the kernel after it (qkv_proj's GEMV; the mlp's first kernel:
// a dense gate_up_proj, with SwiGLU in its epilogue, or Qwen3-MoE's router), with the same
// roundings, so a layer launches two or three kernels fewer. The modules in between are not
// visited, which only an observer could notice. Undefined when this path does not apply (the
// modules then run one by one).
std::pair<at::Tensor, at::Tensor> DecoderLayer::fusedForward(const at::Tensor& positions,
                                                             const at::Tensor& hidden,
                                                             const at::Tensor& residual,
                                                             const ForwardBatch& b) const {
#ifdef SHARDSCOPE_WITH_CUDA_KERNELS
  if (b.observer || !fused::layerFusion()) return {};
  fused::GemvInput attnIn;
  attnIn.x = hidden;
  attnIn.residual = residual;
  attnIn.normWeight = inputLayernorm->weight();
  attnIn.eps = inputLayernorm->eps();
  attnIn.w = selfAttn->qkvProj->weight();
  attnIn.bias = selfAttn->qkvProj->bias();
  const fused::GemvOutput qkv = fused::gemvFused(attnIn);
  if (!qkv.y.defined()) return {};
  at::Tensor r = residual.defined() ? qkv.residualSum : hidden;  // layer 0: the embeddings
  at::Tensor h = selfAttn->forwardFromQkv(positions, qkv.y, b);
  auto [y, rOut] = mlp->forwardAfterNorm(h, r, *postAttentionLayernorm, b);
  if (y.defined()) return {y, rOut};
  std::tie(h, r) = postAttentionLayernorm->forward(h, r, b);  // a shape the kernels do not take
  return {mlp->forward(h, b), r};
#else
  (void)positions, (void)hidden, (void)residual, (void)b;
  return {};
#endif
}

DecoderModel::DecoderModel(Module* parent, const ModelConfig& c, TpRank tp, StageRank stage)
    : Module("model", parent), stage_(std::move(stage)) {
  embedTokens = child<VocabParallelEmbedding>("embed_tokens", this, c.vocabSize, c.hiddenSize, tp);
  layerList = child<ModuleList>("layers", this);
  for (int64_t i = 0; i < c.numLayers; ++i)
    layers.push_back(child<DecoderLayer>(layerList, c, i, tp));
  norm = child<RMSNorm>("norm", this, c.hiddenSize, c.rmsNormEps);
}

void DecoderModel::load(LoadContext& ctx) {
  if (stage_.first()) embedTokens->load(ctx, "model.embed_tokens.weight");
  for (DecoderLayer* l : layers) {
    if (stage_.holdsLayer(*l->layer())) l->load(ctx);
  }
  if (stage_.last()) norm->load(ctx, "model.norm.weight");
}

at::Tensor DecoderModel::forwardStage(const at::Tensor& ids, StageCarry& carry,
                                      const ForwardBatch& b) const {
  at::Tensor& h = carry.hidden;
  at::Tensor& r = carry.residual;
  if (stage_.first()) {
    PortValue in = PortValue::single(ids);
    b.visit(*this, PortRole::Input, in);
    h = embedTokens->forward(in.items[0], b);
    r = at::Tensor();
  }
  for (int64_t i = stage_.stages.begin(stage_.stage); i < numLayers();) {
    // A decode step replays graphs over the layers nobody observes; the rest run here.
    if (b.replayer) i = b.replayer->replay(*this, i, h, r, b);
    if (i == numLayers()) break;
    if (b.failure) applyFailureInjection(*b.failure, i, b, h);
    runLayer(i++, h, r, b);
  }
  if (!stage_.last()) return {};
  at::Tensor normed = r.defined() ? norm->forward(h, r, b).first : norm->forward(h, b);
  PortValue out = PortValue::single(normed);
  b.visit(*this, PortRole::Output, out);
  return out.items[0];
}

void DecoderModel::runLayer(int64_t i, at::Tensor& hidden, at::Tensor& residual,
                            const ForwardBatch& b) const {
  std::tie(hidden, residual) = layers[size_t(i)]->forward(b.positions, hidden, residual, b);
}

DenseCausalLM::DenseCausalLM(const ModelConfig& c, TpRank tp, StageRank stage)
    : CausalLM("model", nullptr), config_(c), stage_(std::move(stage)) {
  c.checkTensorParallel(tp.size, tp.expertParallel, tp.dcp);
  if (stage_.stages.count() == 1) stage_.stages = PipelineStages(c.numLayers, 1);
  model = child<DecoderModel>(this, c, tp, stage_);
  lmHead = child<ParallelLMHead>("lm_head", this, c.vocabSize, c.hiddenSize, tp);
  logitsProcessor = child<LogitsProcessor>("logits_processor", this, c.vocabSize);
  logitsPort_ = child<StepPort>("logits", this, "Logits");
  samplesPort_ = child<StepPort>("samples", this, "Samples");
  kvHeadsPerRank_ =
      model->layers.empty() ? 1 : model->layers[0]->selfAttn->qkvProj->kvHeadsPerRank();
  // MoE layers go into CUDA graphs only where the fused kernels route on the device (the loop
  // over experts reads counts on the host).
  graphCapturable_ = !c.hasSparseLayers() || FusedMoE::recordable(c, tp, kMaxRecordedTokens);
}

const char* DenseCausalLM::kind() const {
  switch (config_.family) {
    case Family::Qwen3:
      return "Qwen3ForCausalLM";
    case Family::Qwen2:
      return "Qwen2ForCausalLM";
    case Family::Llama:
      return "LlamaForCausalLM";
    case Family::Qwen3Moe:
      return "Qwen3MoeForCausalLM";
    case Family::DeepseekV2:
      break;  // its own family file
  }
  return "CausalLM";
}

void DenseCausalLM::load(LoadContext& ctx) {
  model->load(ctx);
  if (config_.tieWordEmbeddings) ctx.source.ignore("lm_head.weight");
  if (!stage_.last()) return;
  if (!config_.tieWordEmbeddings) {
    lmHead->load(ctx, "lm_head.weight");
  } else if (stage_.first()) {
    lmHead->tie(*model->embedTokens);
  } else {  // the last stage holds no embedding: it reads the tied weight for the head (vLLM too)
    lmHead->load(ctx, "model.embed_tokens.weight");
  }
}

at::Tensor DenseCausalLM::forwardStage(const at::Tensor& ids, StageCarry& carry,
                                       const ForwardBatch& b) const {
  PortValue in = PortValue::single(ids);
  if (stage_.first()) b.visit(*this, PortRole::Input, in);
  at::Tensor hidden = model->forwardStage(in.items[0], carry, b);
  if (!stage_.last()) return {};
  PortValue out = PortValue::single(hidden);
  b.visit(*this, PortRole::Output, out);
  return out.items[0];
}

int DenseCausalLM::portStage(const Module& m, PortRole role) const {
  const PipelineStages& stages = stage_.stages;
  if (m.layer()) return stages.stageOfLayer(*m.layer());
  if (&m == model->embedTokens) return 0;
  if (&m == this || &m == model) return role == PortRole::Input ? 0 : stages.last();
  if (&m == samplesPort_ || &m == model->layerList) return kEveryStage;
  return stages.last();  // the final norm, lm_head, the logits processor, model.logits
}

at::Tensor DenseCausalLM::logits(const at::Tensor& hidden, const ForwardBatch& b) const {
  return logitsProcessor->forward(*lmHead, hidden, b);
}

}  // namespace shardscope
