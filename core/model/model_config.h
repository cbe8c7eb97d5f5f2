// ModelConfig: the fields of a Hugging Face config.json that the dense decoder families need
// (Qwen3, Qwen2, Llama), validated on load.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace shardscope {

enum class Family { Qwen3, Qwen2, Llama };

const char* familyName(Family f);

struct RopeScaling {
  std::string type = "default";  // "default" or "llama3"
  double factor = 1.0;
  double lowFreqFactor = 1.0;
  double highFreqFactor = 4.0;
  int64_t originalMaxPositions = 8192;
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

  // Parses config.json text; `origin` names the file in errors.
  static ModelConfig parse(const std::string& jsonText, const std::string& origin);
  static ModelConfig load(const std::filesystem::path& configJson);

  // Throws if tensor parallelism of size tp cannot shard this model as vLLM does.
  void checkTensorParallel(int tp) const;
};

}  // namespace shardscope
