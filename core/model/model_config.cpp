#include "model_config.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

#include "../error.h"
#include "../file_tree.h"

namespace shardscope {
namespace {

using nlohmann::json;

// Field readers: a field of the wrong type is refused with its name (nlohmann's own conversions
// would throw type_error, or cast an out-of-range float to an integer). null counts as missing, as
// in the configs transformers writes ("eos_token_id": null).
const json* field(const json& j, const char* key) {
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

[[noreturn]] void wrongType(const std::string& origin, const char* key, const char* expected,
                            const json& v) {
  throw CheckpointError(origin + ": '" + key + "' must be " + expected + ", got " + v.dump());
}

int64_t requireInt(const json& j, const char* key, const std::string& origin) {
  const json* v = field(j, key);
  if (!v || !v->is_number_integer()) {
    throw CheckpointError(origin + ": '" + key + "' is missing or not an integer");
  }
  return v->get<int64_t>();
}

int64_t optionalInt(const json& j, const char* key, int64_t fallback, const std::string& origin) {
  const json* v = field(j, key);
  if (!v) return fallback;
  if (!v->is_number_integer()) wrongType(origin, key, "an integer", *v);
  return v->get<int64_t>();
}

double optionalNumber(const json& j, const char* key, double fallback, const std::string& origin) {
  const json* v = field(j, key);
  if (!v) return fallback;
  if (!v->is_number()) wrongType(origin, key, "a number", *v);
  return v->get<double>();
}

bool optionalBool(const json& j, const char* key, bool fallback, const std::string& origin) {
  const json* v = field(j, key);
  if (!v) return fallback;
  if (!v->is_boolean()) wrongType(origin, key, "true or false", *v);
  return v->get<bool>();
}

std::string optionalString(const json& j, const char* key, const std::string& fallback,
                           const std::string& origin) {
  const json* v = field(j, key);
  if (!v) return fallback;
  if (!v->is_string()) wrongType(origin, key, "a string", *v);
  return v->get<std::string>();
}

void parseRope(const json& j, ModelConfig& c, const std::string& origin) {
  // transformers 5 writes rope settings into "rope_parameters"; older checkpoints use
  // "rope_theta" and "rope_scaling" at the top level.
  const json* scaling = nullptr;
  if (const json* p = field(j, "rope_parameters"); p && p->is_object()) {
    scaling = p;
    c.ropeTheta = optionalNumber(*p, "rope_theta", c.ropeTheta, origin);
  }
  c.ropeTheta = optionalNumber(j, "rope_theta", c.ropeTheta, origin);
  if (const json* s = field(j, "rope_scaling"); s && s->is_object()) scaling = s;
  if (!scaling) return;
  const std::string type = optionalString(
      *scaling, "rope_type", optionalString(*scaling, "type", "default", origin), origin);
  if (type == "default") return;
  if (type != "llama3" && type != "yarn") {
    throw CheckpointError(origin + ": rope scaling type '" + type +
                          "' is not supported (supported: default, llama3, yarn)");
  }
  c.ropeScaling.type = type == "yarn" ? RopeType::Yarn : RopeType::Llama3;
  if (c.ropeScaling.type == RopeType::Yarn) {
    RopeScaling& y = c.ropeScaling;
    y.originalMaxPositions =
        optionalInt(*scaling, "original_max_position_embeddings", c.maxPositions, origin);
    // As transformers: without a factor, the ratio of the two context lengths.
    y.factor = optionalNumber(
        *scaling, "factor",
        double(c.maxPositions) / double(std::max<int64_t>(y.originalMaxPositions, 1)), origin);
    y.betaFast = optionalNumber(*scaling, "beta_fast", 32.0, origin);
    y.betaSlow = optionalNumber(*scaling, "beta_slow", 1.0, origin);
    y.mscale = optionalNumber(*scaling, "mscale", 0.0, origin);
    y.mscaleAllDim = optionalNumber(*scaling, "mscale_all_dim", 0.0, origin);
    y.attentionFactor = optionalNumber(*scaling, "attention_factor", 0.0, origin);
    return;
  }
  c.ropeScaling.factor = optionalNumber(*scaling, "factor", 8.0, origin);
  c.ropeScaling.lowFreqFactor = optionalNumber(*scaling, "low_freq_factor", 1.0, origin);
  c.ropeScaling.highFreqFactor = optionalNumber(*scaling, "high_freq_factor", 4.0, origin);
  c.ropeScaling.originalMaxPositions =
      optionalInt(*scaling, "original_max_position_embeddings", 8192, origin);
}

// Qwen3-MoE's expert fields; transformers 5 writes num_experts as num_local_experts.
void parseMoe(const json& j, ModelConfig& c, const std::string& origin) {
  MoeConfig& m = c.moe;
  m.numExperts = field(j, "num_experts") ? requireInt(j, "num_experts", origin)
                                         : requireInt(j, "num_local_experts", origin);
  m.numExpertsPerTok = requireInt(j, "num_experts_per_tok", origin);
  m.intermediateSize = requireInt(j, "moe_intermediate_size", origin);
  m.normTopkProb = optionalBool(j, "norm_topk_prob", false, origin);
  m.decoderSparseStep = optionalInt(j, "decoder_sparse_step", 1, origin);
  if (const json* layers = field(j, "mlp_only_layers")) {
    if (!layers->is_array())
      wrongType(origin, "mlp_only_layers", "a list of layer indices", *layers);
    for (const auto& l : *layers) {
      if (!l.is_number_integer())
        wrongType(origin, "mlp_only_layers", "a list of layer indices", *layers);
      m.mlpOnlyLayers.push_back(l.get<int64_t>());
    }
  }
}

// DeepSeek-V2's latent attention and routing fields (HF's DeepseekV2Config names).
void parseDeepseekV2(const json& j, ModelConfig& c, const std::string& origin) {
  MlaConfig& a = c.mla;
  a.qLoraRank = optionalInt(j, "q_lora_rank", 0, origin);  // null: no query LoRA
  a.kvLoraRank = requireInt(j, "kv_lora_rank", origin);
  a.qkNopeHeadDim = requireInt(j, "qk_nope_head_dim", origin);
  a.qkRopeHeadDim = requireInt(j, "qk_rope_head_dim", origin);
  a.vHeadDim = requireInt(j, "v_head_dim", origin);
  MoeConfig& m = c.moe;
  m.numExperts = requireInt(j, "n_routed_experts", origin);
  m.numExpertsPerTok = requireInt(j, "num_experts_per_tok", origin);
  m.intermediateSize = requireInt(j, "moe_intermediate_size", origin);
  m.normTopkProb = optionalBool(j, "norm_topk_prob", false, origin);
  m.firstKDenseReplace = optionalInt(j, "first_k_dense_replace", 0, origin);
  m.numSharedExperts = optionalInt(j, "n_shared_experts", 0, origin);
  m.routedScalingFactor = optionalNumber(j, "routed_scaling_factor", 1.0, origin);
  if (optionalInt(j, "moe_layer_freq", 1, origin) != 1)
    throw CheckpointError(origin + ": 'moe_layer_freq' other than 1 is not supported");
  const std::string method = optionalString(j, "topk_method", "greedy", origin);
  if (method == "group_limited_greedy") {
    m.topkMethod = TopkMethod::GroupLimitedGreedy;
    m.numGroups = requireInt(j, "n_group", origin);
    m.topkGroups = requireInt(j, "topk_group", origin);
  } else if (method != "greedy") {
    throw CheckpointError(origin + ": topk_method '" + method +
                          "' is not supported (supported: greedy, group_limited_greedy)");
  }
  c.headDim = a.qkRopeHeadDim;  // as transformers: the rotary dimension
}

void validateDeepseekV2(const ModelConfig& c, const std::string& origin) {
  const MlaConfig& a = c.mla;
  const MoeConfig& m = c.moe;
  const auto fail = [&](const std::string& what) { throw CheckpointError(origin + ": " + what); };
  const auto positive = [&](int64_t v, const char* key) {
    if (v <= 0) fail(std::string("'") + key + "' must be positive, got " + std::to_string(v));
  };
  positive(a.kvLoraRank, "kv_lora_rank");
  positive(a.qkNopeHeadDim, "qk_nope_head_dim");
  positive(a.qkRopeHeadDim, "qk_rope_head_dim");
  positive(a.vHeadDim, "v_head_dim");
  if (a.qLoraRank < 0) fail("'q_lora_rank' must be positive or null");
  if (m.numSharedExperts < 0) fail("'n_shared_experts' must not be negative");
  if (m.topkMethod != TopkMethod::GroupLimitedGreedy) return;
  if (m.numGroups <= 0 || m.numExperts % m.numGroups != 0) {
    fail("'n_group' (" + std::to_string(m.numGroups) + ") must divide n_routed_experts (" +
         std::to_string(m.numExperts) + ")");
  }
  if (m.topkGroups < 1 || m.topkGroups > m.numGroups ||
      m.numExpertsPerTok > m.topkGroups * (m.numExperts / m.numGroups)) {
    fail("'topk_group' (" + std::to_string(m.topkGroups) + ") must be between 1 and n_group (" +
         std::to_string(m.numGroups) + ") and its groups must hold num_experts_per_tok experts");
  }
}

void validateMoe(const ModelConfig& c, const std::string& origin) {
  const MoeConfig& m = c.moe;
  const auto fail = [&](const std::string& what) { throw CheckpointError(origin + ": " + what); };
  if (m.numExperts <= 0)
    fail("'num_experts' must be positive, got " + std::to_string(m.numExperts));
  if (m.numExpertsPerTok < 1 || m.numExpertsPerTok > m.numExperts) {
    fail("'num_experts_per_tok' (" + std::to_string(m.numExpertsPerTok) +
         ") must be between 1 and num_experts (" + std::to_string(m.numExperts) + ")");
  }
  if (m.intermediateSize <= 0) {
    fail("'moe_intermediate_size' must be positive, got " + std::to_string(m.intermediateSize));
  }
  if (m.decoderSparseStep < 1) {
    fail("'decoder_sparse_step' must be at least 1 (1: every layer sparse), got " +
         std::to_string(m.decoderSparseStep));
  }
  for (int64_t l : m.mlpOnlyLayers) {
    if (l < 0 || l >= c.numLayers) {
      fail("'mlp_only_layers' names layer " + std::to_string(l) + ", but the layers are 0.." +
           std::to_string(c.numLayers - 1));
    }
  }
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
    case Family::Qwen3Moe:
      return "qwen3_moe";
    case Family::DeepseekV2:
      return "deepseek_v2";
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
  const std::string modelType = optionalString(j, "model_type", "", origin);
  if (modelType == "qwen3") {
    c.family = Family::Qwen3;
    c.qkNorm = true;
  } else if (modelType == "qwen2") {
    c.family = Family::Qwen2;
    c.qkvBias = true;
  } else if (modelType == "llama") {
    c.family = Family::Llama;
    c.qkvBias = optionalBool(j, "attention_bias", false, origin);
  } else if (modelType == "qwen3_moe") {
    c.family = Family::Qwen3Moe;
    c.qkNorm = true;
    parseMoe(j, c, origin);
  } else if (modelType == "deepseek_v2") {
    c.family = Family::DeepseekV2;
  } else {
    throw CheckpointError(
        origin + ": model_type '" + modelType +
        "' is not supported (supported: qwen3, qwen2, llama, qwen3_moe, deepseek_v2)");
  }
  if (const json* a = field(j, "architectures"); a && a->is_array() && !a->empty()) {
    if (!(*a)[0].is_string()) wrongType(origin, "architectures", "a list of names", *a);
    c.architecture = (*a)[0].get<std::string>();
  }
  c.vocabSize = requireInt(j, "vocab_size", origin);
  c.hiddenSize = requireInt(j, "hidden_size", origin);
  c.intermediateSize = requireInt(j, "intermediate_size", origin);
  c.numLayers = requireInt(j, "num_hidden_layers", origin);
  c.numHeads = requireInt(j, "num_attention_heads", origin);
  c.numKvHeads =
      field(j, "num_key_value_heads") ? requireInt(j, "num_key_value_heads", origin) : c.numHeads;
  const json* headDim = field(j, "head_dim");
  c.headDim = headDim && headDim->is_number_integer()
                  ? headDim->get<int64_t>()
                  : c.hiddenSize / std::max<int64_t>(c.numHeads, 1);
  c.maxPositions = optionalInt(j, "max_position_embeddings", 4096, origin);
  c.rmsNormEps = optionalNumber(j, "rms_norm_eps", 1e-6, origin);
  c.tieWordEmbeddings = optionalBool(j, "tie_word_embeddings", false, origin);
  c.torchDtype = optionalString(j, "torch_dtype", c.torchDtype, origin);
  c.torchDtype = optionalString(j, "dtype", c.torchDtype, origin);
  if (const json* eos = field(j, "eos_token_id")) {
    const json list = eos->is_array() ? *eos : json::array({*eos});
    for (const auto& e : list) {
      if (!e.is_number_integer()) wrongType(origin, "eos_token_id", "an id or a list of ids", *eos);
      c.eosTokenIds.push_back(e.get<int64_t>());
    }
  }
  if (c.family == Family::DeepseekV2) parseDeepseekV2(j, c, origin);
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
  if (c.family == Family::Qwen3Moe || c.family == Family::DeepseekV2) validateMoe(c, origin);
  if (c.family == Family::DeepseekV2) validateDeepseekV2(c, origin);
  return c;
}

ModelConfig ModelConfig::load(const std::filesystem::path& path) {
  if (!std::filesystem::is_regular_file(path))
    throw CheckpointError("cannot open " + path.string() + ": a checkpoint needs config.json");
  return parse(readFile(path), path.string());
}

bool ModelConfig::isSparseLayer(int64_t layer) const {
  if (moe.numExperts == 0) return false;
  const auto& only = moe.mlpOnlyLayers;
  if (std::find(only.begin(), only.end(), layer) != only.end()) return false;
  if (family == Family::DeepseekV2) return layer >= moe.firstKDenseReplace;
  return (layer + 1) % moe.decoderSparseStep == 0;
}

bool ModelConfig::hasSparseLayers() const {
  for (int64_t i = 0; i < numLayers; ++i) {
    if (isSparseLayer(i)) return true;
  }
  return false;
}

void ModelConfig::checkTensorParallel(int tp, bool expertParallel, int dcp) const {
  if (tp < 1) throw Error("tensor_parallel_size must be at least 1, got " + std::to_string(tp));
  bool dense = false;
  for (int64_t i = 0; i < numLayers && !dense; ++i) dense = !isSparseLayer(i);
  const bool sparse = hasSparseLayers();
  // The first field that size d cannot shard (its name and value), or none.
  const auto blocker = [&](int64_t d) -> std::optional<std::pair<std::string, int64_t>> {
    if (numHeads % d != 0) return std::make_pair("num_attention_heads", numHeads);
    if (dense && intermediateSize % d != 0)
      return std::make_pair("intermediate_size", intermediateSize);
    // KV heads are split when tp <= numKvHeads and replicated when tp exceeds them (as vLLM does).
    if (d <= numKvHeads ? numKvHeads % d != 0 : d % numKvHeads != 0)
      return std::make_pair("num_key_value_heads", numKvHeads);
    if (sparse && expertParallel && moe.numExperts % d != 0)
      return std::make_pair("num_experts", moe.numExperts);
    if (sparse && !expertParallel && moe.intermediateSize % d != 0)
      return std::make_pair("moe_intermediate_size", moe.intermediateSize);
    return std::nullopt;
  };
  const auto failed = blocker(tp);
  if (failed) {
    std::string divisors;
    for (int d = 1; d <= 8; d *= 2) {
      if (!blocker(d)) divisors += (divisors.empty() ? "" : ", ") + std::to_string(d);
    }
    const bool experts = failed->first == "num_experts";
    throw CheckpointError(
        std::string(experts ? "enable_expert_parallel: " : "") + "tensor_parallel_size " +
        std::to_string(tp) + " does not divide " + failed->first + " (" +
        std::to_string(failed->second) + "); sizes that work for this model" +
        (expertParallel ? " with expert parallelism" : "") + ": " + divisors +
        (experts ? " (or leave enable_expert_parallel off to split every expert)" : ""));
  }
  if (dcp == 1) return;
  // Decode-context parallelism splits the latent KV cache along the tokens across groups of dcp
  // ranks of the tensor-parallel group, so dcp must divide tp, and only MLA models have a latent.
  if (family != Family::DeepseekV2) {
    throw Error("decode_context_parallel_size " + std::to_string(dcp) +
                ": decode-context parallelism needs an MLA model (DeepSeek-V2); " +
                familyName(family) + " takes decode_context_parallel_size=1 only");
  }
  if (dcp >= 1 && tp % dcp == 0) return;
  std::string pairs;
  for (int t = 1; t <= 8; t *= 2) {
    if (blocker(t)) continue;
    std::string dcps;
    for (int d = 1; d <= t; d *= 2) dcps += (dcps.empty() ? "" : "|") + std::to_string(d);
    pairs += (pairs.empty() ? "" : ", ") + ("tp=" + std::to_string(t) + " dcp=" + dcps);
  }
  throw Error("decode_context_parallel_size " + std::to_string(dcp) +
              " does not divide tensor_parallel_size " + std::to_string(tp) +
              "; combinations that work for this model: " + pairs);
}

}  // namespace shardscope
