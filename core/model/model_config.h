// ModelConfig: the fields of a Hugging Face config.json that the decoder families need (Qwen3,
// Qwen2, Llama, Qwen3-MoE's experts, DeepSeek-V2's latent attention and routing), validated on
// load.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace shardscope {

enum class Family { Qwen3, Qwen2, Llama, Qwen3Moe, DeepseekV2 };

const char* familyName(Family f);

// rope_scaling's rope_type: none, Llama 3.1's wavelength bands, or YaRN (DeepSeek).
enum class RopeType { Default, Llama3, Yarn };

struct RopeScaling {
  RopeType type = RopeType::Default;
  double factor = 1.0;
  double lowFreqFactor = 1.0;
  double highFreqFactor = 4.0;
  int64_t originalMaxPositions = 8192;
  // YaRN (DeepSeek's fields): the ramp between extrapolated and interpolated frequencies, and the
  // magnitude corrections (0: absent).
  double betaFast = 32.0;
  double betaSlow = 1.0;
  double mscale = 0.0;
  double mscaleAllDim = 0.0;
  double attentionFactor = 0.0;  // 0: derived from mscale / mscale_all_dim
};

// How a MoE router picks its experts (DeepSeek's topk_method).
enum class TopkMethod {
  Greedy,              // the k most probable experts
  GroupLimitedGreedy,  // the k most probable within the topk_group groups of highest maximum
};

// Qwen3-MoE's sparse feed-forward (config.json: num_experts, num_experts_per_tok,
// moe_intermediate_size, norm_topk_prob, decoder_sparse_step, mlp_only_layers).
struct MoeConfig {
  int64_t numExperts = 0;
  int64_t numExpertsPerTok = 0;
  int64_t intermediateSize = 0;  // each expert's
  bool normTopkProb = false;     // renormalise the top-k routing weights to sum to one
  int64_t decoderSparseStep = 1;
  std::vector<int64_t> mlpOnlyLayers;  // layers that keep the dense MLP
  // DeepSeek-V2: layers before firstKDenseReplace are dense; shared experts beside the routed
  // ones; routing weights scaled by routedScalingFactor; group-limited top-k.
  int64_t firstKDenseReplace = 0;
  int64_t numSharedExperts = 0;
  double routedScalingFactor = 1.0;
  TopkMethod topkMethod = TopkMethod::Greedy;
  int64_t numGroups = 1;
  int64_t topkGroups = 1;
};

// DeepSeek-V2's multi-head latent attention (config.json: q_lora_rank, kv_lora_rank,
// qk_nope_head_dim, qk_rope_head_dim, v_head_dim). Each head's query and key are a part without
// position ([nope]) and a rotated part ([rope]); keys and values are expanded from a latent of
// kvLoraRank values per token, which is what the KV cache holds, with the one rope key.
struct MlaConfig {
  int64_t qLoraRank = 0;  // 0: no query LoRA (self_attn.q_proj)
  int64_t kvLoraRank = 0;
  int64_t qkNopeHeadDim = 0;
  int64_t qkRopeHeadDim = 0;
  int64_t vHeadDim = 0;
  int64_t qkHeadDim() const { return qkNopeHeadDim + qkRopeHeadDim; }
};

struct ModelConfig {
  Family family = Family::Qwen3;
  std::string architecture;  // e.g. "Qwen3ForCausalLM"
  int64_t vocabSize = 0;
  int64_t hiddenSize = 0;
  int64_t intermediateSize = 0;
  int64_t numLayers = 0;
  int64_t numHeads = 0;
  int64_t numKvHeads = 0;
  int64_t headDim = 0;
  int64_t maxPositions = 0;
  double rmsNormEps = 1e-6;
  double ropeTheta = 10000.0;
  RopeScaling ropeScaling;
  bool tieWordEmbeddings = false;
  bool qkvBias = false;  // Qwen2
  bool qkNorm = false;   // Qwen3
  std::string torchDtype = "float32";
  std::vector<int64_t> eosTokenIds;
  MoeConfig moe;  // numExperts == 0: every layer is dense
  MlaConfig mla;  // DeepSeek-V2 only

  // Parses config.json text; `origin` names the file in errors.
  static ModelConfig parse(const std::string& jsonText, const std::string& origin);
  static ModelConfig load(const std::filesystem::path& configJson);

  // Whether decoder layer `layer` holds the sparse MoE block rather than the dense MLP (as HF and
  // vLLM decide: not in mlp_only_layers, and (layer + 1) % decoder_sparse_step == 0; DeepSeek:
  // from first_k_dense_replace on).
  bool isSparseLayer(int64_t layer) const;
  bool hasSparseLayers() const;

  // Throws if tensor parallelism of size tp cannot shard this model as vLLM does; with
  // `expertParallel` (vLLM's enable_expert_parallel) the experts are split whole across ranks;
  // `dcp` (decode_context_parallel_size) must divide tp, and only MLA models take it.
  void checkTensorParallel(int tp, bool expertParallel = false, int dcp = 1) const;
};

}  // namespace shardscope
