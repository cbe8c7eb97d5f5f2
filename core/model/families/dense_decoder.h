// Decoder families: Qwen3, Qwen2 and Llama, mirroring vLLM's qwen3.py / qwen2.py / llama.py, and
// Qwen3-MoE (qwen3_moe.py). They share one forward; a family differs only in what its config
// switches on:
//   Qwen3: per-head q_norm/k_norm before RoPE.   Qwen2: bias on q/k/v.
//   Llama: llama3 RoPE scaling, tied embeddings in small models.
//   Qwen3-MoE: Qwen3's attention; `mlp` is the sparse block (qwen3_moe.h, mlp.{gate, experts})
//   in the layers ModelConfig::isSparseLayer names, the dense MLP in the others.
// Module tree (vLLM names):
//   model.model.embed_tokens, model.model.layers[i].{input_layernorm, self_attn.{qkv_proj, q_norm,
//   k_norm, rotary_emb, attn, o_proj}, post_attention_layernorm, mlp.{gate_up_proj, act_fn,
//   down_proj}}, model.model.norm, model.lm_head, model.logits_processor.
#pragma once

#include <vector>

#include "../causal_lm.h"
#include "../layers/attention.h"
#include "../layers/column_parallel_linear.h"
#include "../layers/rms_norm.h"
#include "../layers/rotary_embedding.h"
#include "../layers/row_parallel_linear.h"
#include "../layers/silu_and_mul.h"
#include "../layers/vocab_parallel_embedding.h"
#include "feed_forward.h"

namespace shardscope {

// "self_attn": [T, H] -> [T, H].
class DecoderAttention : public Module {
 public:
  DecoderAttention(Module* parent, const ModelConfig& c, int64_t layer, TpRank tp);
  const char* kind() const override { return "Attention block"; }
  void load(LoadContext& ctx, const std::string& hfPrefix);
  at::Tensor forward(const at::Tensor& positions, const at::Tensor& x, const ForwardBatch& b) const;
  // The rest of forward from qkv_proj's output (the layer's fused step computes qkv itself).
  at::Tensor forwardFromQkv(const at::Tensor& positions, const at::Tensor& qkv,
                            const ForwardBatch& b) const;

  QKVParallelLinear* qkvProj;
  RMSNorm* qNorm = nullptr;  // Qwen3 only
  RMSNorm* kNorm = nullptr;
  RotaryEmbedding* rotaryEmb;
  Attention* attn;
  RowParallelLinear* oProj;

 private:
  at::Tensor fusedDecode(const at::Tensor& positions, const at::Tensor& qkv,
                         const ForwardBatch& b) const;

  int64_t qSize_, kvSize_, headDim_;
};

// "mlp" of a dense layer: [T, H] -> [T, H]. Also DeepSeek's `mlp.shared_experts`: its own name
// and width, and with reduceResults off its down projection (and so its output) is this rank's
// partial sum, summed with the routed experts' before the block's one reduce.
class DecoderMLP : public FeedForward {
 public:
  DecoderMLP(Module* parent, const ModelConfig& c, TpRank tp);
  DecoderMLP(std::string name, Module* parent, int64_t hidden, int64_t intermediate, TpRank tp,
             bool reduceResults);
  const char* kind() const override { return "MLP"; }
  void load(LoadContext& ctx, const std::string& hfPrefix) override;
  at::Tensor forward(const at::Tensor& x, const ForwardBatch& b) const override;
  // The norm inside gate_up_proj's GEMV and SwiGLU in its epilogue (fused::gemvFused).
  std::pair<at::Tensor, at::Tensor> forwardAfterNorm(const at::Tensor& x,
                                                     const at::Tensor& residual,
                                                     const RMSNorm& norm,
                                                     const ForwardBatch& b) const override;
  // Called from a trace with a whole x, a partial-sum MLP returns the reduced (whole) output.
  std::vector<at::Tensor> callWhole(const ModuleCall& call) const override;

  MergedColumnParallelLinear* gateUpProj;
  SiluAndMul* actFn;
  RowParallelLinear* downProj;
};

// "layers[i]": (hidden, residual) -> (hidden, residual).
class DecoderLayer : public Module {
 public:
  DecoderLayer(Module* parent, const ModelConfig& c, int64_t layer, TpRank tp);
  const char* kind() const override { return "DecoderLayer"; }
  void load(LoadContext& ctx);
  std::pair<at::Tensor, at::Tensor> forward(const at::Tensor& positions, const at::Tensor& hidden,
                                            const at::Tensor& residual,
                                            const ForwardBatch& b) const;

  RMSNorm* inputLayernorm;
  DecoderAttention* selfAttn;
  RMSNorm* postAttentionLayernorm;
  FeedForward* mlp;  // DecoderMLP, or Qwen3-MoE's sparse block

 private:
  std::pair<at::Tensor, at::Tensor> fusedForward(const at::Tensor& positions,
                                                 const at::Tensor& hidden,
                                                 const at::Tensor& residual,
                                                 const ForwardBatch& b) const;

  int64_t layer_;
};

// "model.model": ids -> final normed hidden states.
class DecoderModel : public Module, public LayerStack {
 public:
  DecoderModel(Module* parent, const ModelConfig& c, TpRank tp, StageRank stage);
  const char* kind() const override { return "DecoderModel"; }
  void load(LoadContext& ctx);
  // The stage's part (CausalLM::forwardStage): embedding on the first, norm on the last.
  at::Tensor forwardStage(const at::Tensor& ids, StageCarry& carry, const ForwardBatch& b) const;

  // The end of this stage's layers (all of them with one stage): graphs replay no further.
  int64_t numLayers() const override { return stage_.stages.end(stage_.stage); }
  void runLayer(int64_t i, at::Tensor& hidden, at::Tensor& residual,
                const ForwardBatch& b) const override;

  VocabParallelEmbedding* embedTokens;
  ModuleList* layerList;
  std::vector<DecoderLayer*> layers;  // every layer, with weights only on the stage holding it
  RMSNorm* norm;

 private:
  StageRank stage_;
};

// "model": the causal LM root.
class DenseCausalLM : public CausalLM {
 public:
  DenseCausalLM(const ModelConfig& c, TpRank tp, StageRank stage = {});
  const char* kind() const override;
  void load(LoadContext& ctx);

  const ModelConfig& config() const override { return config_; }
  int64_t kvHeadsPerRank() const override { return kvHeadsPerRank_; }
  bool graphCapturable() const override { return graphCapturable_; }
  at::Tensor forwardStage(const at::Tensor& ids, StageCarry& carry,
                          const ForwardBatch& b) const override;
  const StageRank& stage() const override { return stage_; }
  int portStage(const Module& m, PortRole role) const override;
  at::Tensor logits(const at::Tensor& hidden, const ForwardBatch& b) const override;

  DecoderModel* model;
  ParallelLMHead* lmHead;
  LogitsProcessor* logitsProcessor;
  StepPort* logitsPort_;
  StepPort* samplesPort_;

  const Module& logitsPort() const override { return *logitsPort_; }
  const Module& samplesPort() const override { return *samplesPort_; }

 private:
  ModelConfig config_;
  int64_t kvHeadsPerRank_;
  StageRank stage_;
  bool graphCapturable_;
};

}  // namespace shardscope
