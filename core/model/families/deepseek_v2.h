// DeepSeek-V2 / V2-Lite (DeepseekV2ForCausalLM), mirroring vLLM's deepseek_v2.py: multi-head latent
// attention over a latent KV cache, and from first_k_dense_replace on a MoE block with routed and
// shared experts. Module tree (vLLM names):
//   model.model.embed_tokens, model.model.layers[i].{input_layernorm,
//   self_attn.{q_proj | q_a_proj, q_a_layernorm, q_b_proj; kv_a_proj_with_mqa, kv_a_layernorm,
//   kv_b_proj, rotary_emb, mla_attn, o_proj}, post_attention_layernorm,
//   mlp.{gate_up_proj, act_fn, down_proj} | mlp.{gate, experts, shared_experts}},
//   model.model.norm, model.lm_head, model.logits_processor.
// Shards: q_proj / q_b_proj column (DCPGroupColumnParallelLinear under decode-context
// parallelism), kv_a_proj_with_mqa and q_a_proj replicated, kv_b_proj column, o_proj row; the
// experts and the shared experts' down projection leave partial sums that the block reduces once.
#pragma once

#include <vector>

#include "../causal_lm.h"
#include "../layers/column_parallel_linear.h"
#include "../layers/deepseek_scaling_rotary_embedding.h"
#include "../layers/fused_moe.h"
#include "../layers/mla_attention.h"
#include "../layers/replicated_linear.h"
#include "../layers/rms_norm.h"
#include "../layers/row_parallel_linear.h"
#include "../layers/vocab_parallel_embedding.h"
#include "dense_decoder.h"
#include "feed_forward.h"

namespace shardscope {

// "self_attn": [T, H] -> [T, H].
class DeepseekV2MLAAttention : public Module {
 public:
  DeepseekV2MLAAttention(Module* parent, const ModelConfig& c, int64_t layer, TpRank tp);
  const char* kind() const override { return "DeepseekV2MLAAttention"; }
  void load(LoadContext& ctx, const std::string& hfPrefix);
  at::Tensor forward(const at::Tensor& positions, const at::Tensor& x, const ForwardBatch& b) const;

  ColumnParallelLinear* qProj = nullptr;  // V2-Lite (no q LoRA)
  ReplicatedLinear* qAProj = nullptr;     // V2: q_a_proj -> q_a_layernorm -> q_b_proj
  RMSNorm* qALayernorm = nullptr;
  ColumnParallelLinear* qBProj = nullptr;
  ReplicatedLinear* kvAProjWithMqa;
  RMSNorm* kvALayernorm;
  ColumnParallelLinear* kvBProj;
  DeepseekScalingRotaryEmbedding* rotaryEmb;
  MLAAttention* mlaAttn;
  RowParallelLinear* oProj;

 private:
  // Rows of kv_b_proj.weight for the query heads of this rank's decode-context group (its own
  // shard without DCP): [groupHeads * (nope + v), kv_lora].
  at::Tensor groupExpansion() const;

  MlaConfig mla_;
  TpRank tp_;
  at::Tensor kvBGroup_;  // the group's rows of kv_b_proj.weight, under DCP only
};

// "mlp" of a MoE layer: [T, H] -> [T, H] (vLLM's DeepseekV2MoE).
//   router_logits = gate(x); y = experts(x, router_logits) + shared_experts(x); all_reduce(y)
class DeepseekV2MoE : public FeedForward {
 public:
  DeepseekV2MoE(Module* parent, const ModelConfig& c, TpRank tp);
  const char* kind() const override { return "DeepseekV2MoE"; }
  void load(LoadContext& ctx, const std::string& hfPrefix) override;
  at::Tensor forward(const at::Tensor& x, const ForwardBatch& batch) const override;

  ReplicatedLinear* gate;
  FusedMoE* experts;
  DecoderMLP* sharedExperts = nullptr;  // partial-sum output; none when n_shared_experts is 0
};

// "layers[i]": (hidden, residual) -> (hidden, residual).
class DeepseekV2DecoderLayer : public Module {
 public:
  DeepseekV2DecoderLayer(Module* parent, const ModelConfig& c, int64_t layer, TpRank tp);
  const char* kind() const override { return "DeepseekV2DecoderLayer"; }
  void load(LoadContext& ctx);
  std::pair<at::Tensor, at::Tensor> forward(const at::Tensor& positions, const at::Tensor& hidden,
                                            const at::Tensor& residual,
                                            const ForwardBatch& b) const;

  RMSNorm* inputLayernorm;
  DeepseekV2MLAAttention* selfAttn;
  RMSNorm* postAttentionLayernorm;
  FeedForward* mlp;  // DecoderMLP before first_k_dense_replace, DeepseekV2MoE after

 private:
  int64_t layer_;
};

// "model.model": ids -> final normed hidden states.
class DeepseekV2Model : public Module, public LayerStack {
 public:
  DeepseekV2Model(Module* parent, const ModelConfig& c, TpRank tp);
  const char* kind() const override { return "DeepseekV2Model"; }
  void load(LoadContext& ctx);
  at::Tensor forward(const at::Tensor& ids, const ForwardBatch& b) const;

  int64_t numLayers() const override { return int64_t(layers.size()); }
  void runLayer(int64_t i, at::Tensor& hidden, at::Tensor& residual,
                const ForwardBatch& b) const override;

  VocabParallelEmbedding* embedTokens;
  ModuleList* layerList;
  std::vector<DeepseekV2DecoderLayer*> layers;
  RMSNorm* norm;
};

// "model": the causal LM root.
class DeepseekV2ForCausalLM : public CausalLM {
 public:
  DeepseekV2ForCausalLM(const ModelConfig& c, TpRank tp);
  const char* kind() const override { return "DeepseekV2ForCausalLM"; }
  void load(LoadContext& ctx);

  const ModelConfig& config() const override { return config_; }
  int64_t kvHeadsPerRank() const override { return 1; }
  // The latent and the rope key per token, split along the tokens across a DCP group.
  KvCacheLayout kvCacheLayout() const override;
  bool graphCapturable() const override { return graphCapturable_; }
  // One pipeline stage: every layer, and every port, runs on it.
  at::Tensor forwardStage(const at::Tensor& ids, StageCarry& carry,
                          const ForwardBatch& b) const override;
  const StageRank& stage() const override { return stage_; }
  int portStage(const Module& m, PortRole role) const override;
  at::Tensor logits(const at::Tensor& hidden, const ForwardBatch& b) const override;
  const Module& logitsPort() const override { return *logitsPort_; }
  const Module& samplesPort() const override { return *samplesPort_; }

  DeepseekV2Model* model;
  ParallelLMHead* lmHead;
  LogitsProcessor* logitsProcessor;

 private:
  ModelConfig config_;
  TpRank tp_;
  StageRank stage_;
  StepPort* logitsPort_;
  StepPort* samplesPort_;
  bool graphCapturable_;
};

}  // namespace shardscope
