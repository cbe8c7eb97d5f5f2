// TraceScriptGenerator: random, valid trace scripts for the soak test (issue 14). Given a seed and
// the model's widths it writes a script in the trace language (docs/trace-language.md) that reads
// and writes ports in model order, saves through lists, iterates step ranges, runs one to three
// invokes, calls modules, stops requests and samples greedily or with a seed; with some
// probability it holds ONE deliberate error. The same seed always gives the same text, on every
// machine (the generator has its own random numbers; no <random> distributions).
//
// What a script guarantees, so that a tp=1 run and a tp=2 run of it can be compared:
//  - every value it saves is layout-free: fused ports (qkv_proj, gate_up_proj) are read through
//    the head accessors or sorted along the feature dimension, and written only as a whole or
//    through the accessors; every other port is whole and in the same order at every tp;
//  - invoke j of a trace appends `model.logits` to a list named logitsListName(j) once per step,
//    from step 0 to the request's last step (so a generated id can be checked against the logits
//    it was sampled from);
//  - every trace sets ignore_eos=True, so lengths depend only on max_tokens and tracer.stop();
//  - it prints only shapes, lengths and token ids, never floats.
// Not a LibTorch client: plain C++.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace shardscope::soak {

// What the generator needs of the model: which heads and column slices exist. Defaults: the
// demo model (core/model/model_source.cpp).
struct ModelShape {
  int layers = 4;
  int heads = 8;
  int kvHeads = 4;
  int headDim = 8;
  int hidden = 32;
  int intermediate = 96;
  bool qkNorm = true;  // Qwen3: self_attn.q_norm / k_norm ports exist
  // Qwen3-MoE: the routed experts, and per layer whether its mlp is the sparse block (mlp.gate,
  // mlp.experts) rather than the dense MLP. Empty: every layer dense.
  int experts = 0;
  std::vector<bool> sparse;
  bool isSparse(int layer) const { return size_t(layer) < sparse.size() && sparse[size_t(layer)]; }
};

struct GeneratorOptions {
  ModelShape model;
  std::string modelName = "demo";  // VLLM("...") of the script
  bool enforceEager = false;       // VLLM(..., enforce_eager=True)
  bool expertParallel = false;     // VLLM(..., enable_expert_parallel=True)
  double errorProbability = 0.15;  // chance that a script holds one deliberate error
  int maxTraces = 2;               // `with model.trace(...)` blocks per script
  int maxInvokes = 3;
  int maxTokens = 4;
};

struct GeneratedScript {
  uint64_t seed = 0;
  std::string text;
  std::string error;    // the deliberate error's kind ("ran-past", ...), "" for none
  std::string summary;  // one line for the log: traces, invokes, steps, sampling, features
};

GeneratedScript generateTraceScript(uint64_t seed, const GeneratorOptions& options = {});

// The list invoke `invoke` of every trace appends its logits to, one [1, V] row per step.
std::string logitsListName(int invoke);

// The invoke a saved value of a generated script belongs to, from its name (r2[0], lg1[3],
// v0_7, out2), or -1 for a name the generator does not make.
int invokeOfValue(const std::string& savedName);

// The seed of script `index` of a run started with `runSeed` (what the soak log prints).
uint64_t scriptSeed(uint64_t runSeed, uint64_t index);

}  // namespace shardscope::soak
