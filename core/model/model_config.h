// ModelConfig: the fields of a Hugging Face config.json that the decoder families need (Qwen3,
// Qwen2, Llama, and Qwen3-MoE's experts), validated on load.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace shardscope {

enum class Family { Qwen3, Qwen2, Llama, Qwen3Moe };

const char* familyName(Family f);

struct RopeScaling {
  std::string type = "default";  // "default" or "llama3"
  double factor = 1.0;
  double lowFreqFactor = 1.0;
  double highFreqFactor = 4.0;
  int64_t originalMaxPositions = 8192;
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

  // Parses config.json text; `origin` names the file in errors.
  static ModelConfig parse(const std::string& jsonText, const std::string& origin);
  static ModelConfig load(const std::filesystem::path& configJson);

  // Whether decoder layer `layer` holds the sparse MoE block rather than the dense MLP (as HF and
  // vLLM decide: not in mlp_only_layers, and (layer + 1) % decoder_sparse_step == 0).
  bool isSparseLayer(int64_t layer) const;
  bool hasSparseLayers() const;

  // Throws if tensor parallelism of size tp cannot shard this model as vLLM does; with
  // `expertParallel` (vLLM's enable_expert_parallel) the experts are split whole across ranks.
  void checkTensorParallel(int tp, bool expertParallel = false) const;
};

}  // namespace shardscope
