#include "model_config.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "../error.h"
#include "../file_tree.h"

namespace shardscope {
namespace {

using nlohmann::json;

int64_t requireInt(const json& j, const char* key, const std::string& origin) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer()) {
    throw CheckpointError(origin + ": '" + key + "' is missing or not an integer");
  }
  return it->get<int64_t>();
}

void parseRope(const json& j, ModelConfig& c, const std::string& origin) {
  // transformers 5 writes rope settings into "rope_parameters"; older checkpoints use
  // "rope_theta" and "rope_scaling" at the top level.
  const json* scaling = nullptr;
  if (auto it = j.find("rope_parameters"); it != j.end() && it->is_object()) {
    scaling = &*it;
    if (auto t = it->find("rope_theta"); t != it->end()) c.ropeTheta = t->get<double>();
  }
  if (auto it = j.find("rope_theta"); it != j.end() && it->is_number())
    c.ropeTheta = it->get<double>();
  if (auto it = j.find("rope_scaling"); it != j.end() && it->is_object()) scaling = &*it;
  if (!scaling) return;
  std::string type = scaling->value("rope_type", scaling->value("type", std::string("default")));
  if (type == "default") return;
  if (type != "llama3") {
    throw CheckpointError(origin + ": rope scaling type '" + type +
                          "' is not supported (supported: default, llama3)");
  }
  c.ropeScaling.type = type;
  c.ropeScaling.factor = scaling->value("factor", 8.0);
  c.ropeScaling.lowFreqFactor = scaling->value("low_freq_factor", 1.0);
  c.ropeScaling.highFreqFactor = scaling->value("high_freq_factor", 4.0);
  c.ropeScaling.originalMaxPositions = scaling->value("original_max_position_embeddings", 8192);
}

}  // namespace

const char* familyName(Family f) {
  switch (f) {
    case Family::Qwen3:
      return "qwen3";
    case Family::Qwen2:
      return "qwen2";
    case Family::Llama:
      return "llama";
  }
  return "?";
}

ModelConfig ModelConfig::parse(const std::string& text, const std::string& origin) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw CheckpointError(origin + ": not valid JSON (" + e.what() + ")");
  }
  if (!j.is_object()) throw CheckpointError(origin + ": expected a JSON object");
  ModelConfig c;
  const std::string modelType = j.value("model_type", std::string());
  if (modelType == "qwen3") {
    c.family = Family::Qwen3;
    c.qkNorm = true;
  } else if (modelType == "qwen2") {
    c.family = Family::Qwen2;
    c.qkvBias = true;
  } else if (modelType == "llama") {
    c.family = Family::Llama;
    c.qkvBias = j.value("attention_bias", false);
  } else {
    throw CheckpointError(origin + ": model_type '" + modelType +
                          "' is not supported (supported: qwen3, qwen2, llama)");
  }
  if (auto it = j.find("architectures"); it != j.end() && it->is_array() && !it->empty()) {
    c.architecture = (*it)[0].get<std::string>();
  }
  c.vocabSize = requireInt(j, "vocab_size", origin);
  c.hiddenSize = requireInt(j, "hidden_size", origin);
  c.intermediateSize = requireInt(j, "intermediate_size", origin);
  c.numLayers = requireInt(j, "num_hidden_layers", origin);
  c.numHeads = requireInt(j, "num_attention_heads", origin);
  c.numKvHeads =
      j.contains("num_key_value_heads") ? requireInt(j, "num_key_value_heads", origin) : c.numHeads;
  c.headDim = (j.contains("head_dim") && j["head_dim"].is_number_integer())
                  ? j["head_dim"].get<int64_t>()
                  : c.hiddenSize / std::max<int64_t>(c.numHeads, 1);
  c.maxPositions = j.value("max_position_embeddings", int64_t(4096));
  c.rmsNormEps = j.value("rms_norm_eps", 1e-6);
  c.tieWordEmbeddings = j.value("tie_word_embeddings", false);
  if (auto it = j.find("torch_dtype"); it != j.end() && it->is_string()) c.torchDtype = *it;
  if (auto it = j.find("dtype"); it != j.end() && it->is_string()) c.torchDtype = *it;
  if (auto it = j.find("eos_token_id"); it != j.end()) {
    if (it->is_number_integer()) c.eosTokenIds.push_back(it->get<int64_t>());
    if (it->is_array()) {
      for (const auto& e : *it) c.eosTokenIds.push_back(e.get<int64_t>());
    }
  }
  parseRope(j, c, origin);

  const auto positive = [&](int64_t v, const char* key) {
    if (v <= 0)
      throw CheckpointError(origin + ": '" + key + "' must be positive, got " + std::to_string(v));
  };
  positive(c.vocabSize, "vocab_size");
  positive(c.hiddenSize, "hidden_size");
  positive(c.intermediateSize, "intermediate_size");
  positive(c.numLayers, "num_hidden_layers");
  positive(c.numHeads, "num_attention_heads");
  positive(c.numKvHeads, "num_key_value_heads");
  positive(c.headDim, "head_dim");
  if (c.numHeads % c.numKvHeads != 0) {
    throw CheckpointError(origin + ": num_attention_heads (" + std::to_string(c.numHeads) +
                          ") is not a multiple of num_key_value_heads (" +
                          std::to_string(c.numKvHeads) + ")");
  }
  if (c.headDim % 2 != 0)
    throw CheckpointError(origin + ": head_dim must be even for rotary embeddings");
  return c;
}

ModelConfig ModelConfig::load(const std::filesystem::path& path) {
  if (!std::filesystem::is_regular_file(path))
    throw CheckpointError("cannot open " + path.string() + ": a checkpoint needs config.json");
  return parse(readFile(path), path.string());
}

void ModelConfig::checkTensorParallel(int tp) const {
  const auto fail = [&](const std::string& what, int64_t n) {
    std::string divisors;
    for (int d = 1; d <= 8; d *= 2) {
      if (numHeads % d == 0 && intermediateSize % d == 0 &&
          (numKvHeads % d == 0 || d % numKvHeads == 0)) {
        divisors += (divisors.empty() ? "" : ", ") + std::to_string(d);
      }
    }
    throw CheckpointError("tensor_parallel_size " + std::to_string(tp) + " does not divide " +
                          what + " (" + std::to_string(n) +
                          "); sizes that work for this model: " + divisors);
  };
  if (tp < 1) throw Error("tensor_parallel_size must be at least 1, got " + std::to_string(tp));
  if (numHeads % tp != 0) fail("num_attention_heads", numHeads);
  if (intermediateSize % tp != 0) fail("intermediate_size", intermediateSize);
  // KV heads are split when tp <= numKvHeads and replicated when tp exceeds them (as vLLM does).
  if (tp <= numKvHeads ? numKvHeads % tp != 0 : tp % numKvHeads != 0) {
    fail("num_key_value_heads", numKvHeads);
  }
}

}  // namespace shardscope
