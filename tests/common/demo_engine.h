// The engine on the random demo model (ensureDemoModel(): Qwen3 architecture, the real Qwen3
// tokenizer) and greedy or sampled requests for it, as the engine suites use them.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/test_support.h"
#include "core/engine/engine.h"
#include "core/model/model_source.h"
#include "core/model/tokenizer.h"

namespace shardscope::test {

// An engine at tensor parallelism `tp` on the test device, f32, the local process group.
inline std::unique_ptr<Engine> demoEngine(int tp) {
  EngineOptions o;
  o.model = ensureDemoModel().string();
  o.tp = tp;
  o.device = deviceKind();
  o.dtype = DType::F32;
  o.backend = GroupBackend::Local;
  return std::make_unique<Engine>(o);
}

// `prompts` encoded with the engine's tokenizer; greedy unless `temperature` is set (then top-k 50
// and top-p 0.95 from `seed`); EOS ignored, so each request runs maxTokens steps.
inline GenerateRequest demoRequest(const Engine& e, std::vector<std::string> prompts,
                                   int64_t maxTokens, double temperature = 0.0, uint64_t seed = 0) {
  GenerateRequest r;
  for (const auto& p : prompts) r.prompts.push_back(e.tokenizer()->encode(p));
  r.sampling.maxTokens = maxTokens;
  r.sampling.temperature = temperature;
  r.sampling.seed = seed;
  r.sampling.topK = temperature > 0 ? 50 : 0;
  r.sampling.topP = temperature > 0 ? 0.95 : 1.0;
  r.sampling.ignoreEos = true;
  return r;
}

}  // namespace shardscope::test
