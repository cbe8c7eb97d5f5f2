// Fuzz target: a whole trace script, lexed, parsed and run by ScriptRunner on a small model
// (random Qwen3 weights: 4 layers, hidden 32, 8 query / 4 KV heads, the Qwen3 tokenizer, 64
// positions so no generation runs long) at tp=2 on local rank threads, with a small instruction
// budget. Every VLLM(...) of the script gets that one engine. The run must end normally or with
// ScriptError / Error, and the engine must still run a trace afterwards.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "core/engine/engine.h"
#include "core/model/model_source.h"
#include "core/trace/script_runner.h"
#include "fuzz_support.h"

namespace {

using namespace shardscope;

constexpr const char* kConfig = R"({
  "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": 151936,
  "hidden_size": 32, "intermediate_size": 96, "num_hidden_layers": 4,
  "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 8,
  "max_position_embeddings": 64, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
  "tie_word_embeddings": false, "eos_token_id": 151645
})";

constexpr long long kBudget = 20'000;  // evaluation steps per block

struct Fixture {
  fuzz::ScratchDir dir;
  std::unique_ptr<Engine> engine;

  Fixture() {
    const auto tokenizer = qwen3TokenizerAsset();
    if (!std::filesystem::exists(tokenizer)) {
      std::fprintf(stderr, "fuzz: the Qwen3 tokenizer is missing at %s: run scripts/setup\n",
                   tokenizer.c_str());
      std::exit(2);
    }
    const auto config = dir.write("config.json", kConfig, std::char_traits<char>::length(kConfig));
    std::filesystem::create_symlink(tokenizer, dir.path() / "tokenizer.json");
    EngineOptions o;
    o.model = "random:" + config.string() + "@1";
    o.tp = 2;
    o.device = DeviceKind::Cpu;
    o.dtype = DType::F32;
    o.backend = GroupBackend::Local;
    o.threadsPerRank = 1;
    engine = std::make_unique<Engine>(o);
  }
};

Fixture& fixture() {
  static Fixture f;
  return f;
}

trace::RunOptions runOptions() {
  trace::RunOptions o;
  o.engine = fixture().engine.get();
  o.budget = kBudget;
  o.out = [](const std::string&) {};
  o.note = [](const std::string&) {};
  return o;
}

// A failed or odd script must leave the engine able to run the next job.
void checkEngineStillWorks() {
  trace::ScriptRunner runner(runOptions());
  try {
    runner.run("m = VLLM(\"demo\")\nwith m.trace([1, 2, 3]):\n    l = m.logits.save()\n",
               "canary.py");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz: the engine cannot run a trace after this input: %s\n", e.what());
    std::abort();
  }
  const auto logits = runner.tensorValue("l");
  if (!logits || logits->shape.empty() || logits->shape.back() != 151936) {
    std::fprintf(stderr, "fuzz: the trace after this input read %s\n",
                 logits ? logits->shapeString().c_str() : "no tensor");
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fixture();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string source(reinterpret_cast<const char*>(data), size);
  {
    trace::ScriptRunner runner(runOptions());
    fuzz::expectRefusalOrSuccess([&] { runner.run(source, "fuzz.py"); });
  }
  // Only scripts that reached the engine can have disturbed it.
  if (source.find("trace") != std::string::npos || source.find("generate") != std::string::npos)
    checkEngineStillWorks();
  return 0;
}
