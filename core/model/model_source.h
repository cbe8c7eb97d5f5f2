// ModelSource: what a model name resolves to before any rank loads it. A spec is
//   "" or "demo"            the built-in demo model (trained, shipped in share/shardscope),
//   "random:CONFIG.json[@SEED]"  a config with deterministic random weights (no files),
//   a directory             a Hugging Face checkpoint,
//   "org/name"              a checkpoint in the Hugging Face cache ($HF_HUB_CACHE, $HF_HOME/hub,
//                           ~/.cache/huggingface/hub); nothing is downloaded.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "model_config.h"

namespace shardscope {

class WeightSource;

struct ModelSource {
  std::string spec;           // as the user gave it
  std::filesystem::path dir;  // checkpoint directory (empty for random:)
  ModelConfig config;
  std::shared_ptr<WeightSource> weights;
  std::filesystem::path tokenizerJson;  // empty when the checkpoint has none
  std::vector<int64_t> eosTokenIds;     // config.json and generation_config.json together
  std::string configSha256;             // of config.json's bytes (random: of the config file)
};

ModelSource openModelSource(const std::string& spec);

// "" and "demo" name the built-in demo model (a folder called demo is ./demo).
bool isDemoSpec(const std::string& spec);

// The tokenizer.json that goes with a model spec (empty if it has none), without loading weights.
std::filesystem::path tokenizerPathFor(const std::string& spec);

// Resolves a path or a Hugging Face cache name to a checkpoint directory, or throws naming every
// place it looked.
std::filesystem::path resolveModelDir(const std::string& nameOrPath);

// ShardScope's cache directory: $SHARDSCOPE_CACHE, else $XDG_CACHE_HOME/shardscope, else
// ~/.cache/shardscope.
std::filesystem::path cacheDir();

// The built-in demo model ("" and "demo"): a 4-layer Qwen3-architecture checkpoint trained on
// English text from Debian packages, with its own 8192-id tokenizer (resources/demo-model). Found
// at $SHARDSCOPE_DEMO_MODEL when set (only there), else beside the executable
// (bin/../share/shardscope/demo-model: the build tree and installed trees), else in the install
// prefix; throws naming those places.
std::filesystem::path demoModelDir();

// The random test model, created on first use in the cache directory: the demo model's layer
// count and head counts (8 query, 4 KV heads) at tiny widths (hidden 32, head_dim 8), random
// weights from a fixed seed and the real Qwen3 tokenizer (fetched by scripts/setup). Suites whose
// numbers rest on those widths or on Qwen3's vocabulary map VLLM("demo") to it.
std::filesystem::path ensureDemoModel();

// Writes a Hugging Face checkpoint (config.json + model.safetensors) for `configJson` with
// deterministic random weights from `seed`, stored as `dtype` ("bf16", "f16", "f32"). Streams one
// tensor at a time; the directory appears only when complete.
void writeRandomCheckpoint(const std::string& configJson, const std::filesystem::path& dir,
                           uint64_t seed, const std::string& dtype);

// Where scripts/fetch-assets puts the Qwen3 tokenizer.json.
std::filesystem::path qwen3TokenizerAsset();

}  // namespace shardscope
