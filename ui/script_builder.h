// ScriptBuilder: every request the GUI makes is a trace script, built here as text, shown in the
// script editor and stored in the session log. The scripts are plain nnsight-style Python that
// `shardscope-cli run` runs unchanged (the model line names the same model, tp, dtype and device).
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/engine/engine_types.h"

namespace shardscope::ui {

struct GenerationSettings {
  std::vector<std::string> prompts;  // one invoke each
  int64_t maxTokens = 8;
  double temperature = 0.0;
  uint64_t seed = 0;
};

// A port as the module tree shows it.
struct PortRef {
  std::string module;  // "model.model.layers[1].self_attn.o_proj"
  std::string port;    // "input" / "output"
  bool tuple = false;  // the value is a tuple: the script reads item 0
};

using HeadSet = std::map<int64_t, std::set<int64_t>>;  // layer -> heads to zero

class ScriptBuilder {
 public:
  explicit ScriptBuilder(const ModelInfo& model) : model_(model) {}

  // Saves the port's value at `step` for every prompt as value_0, value_1, ...
  std::string readPort(const PortRef& port, int64_t step, const GenerationSettings& g) const;
  // Generation with each prompt; saves each invoke's step-0 logits as logits_0, logits_1, ...
  std::string generate(const GenerationSettings& g) const;
  // Baseline and ablated invokes of the first prompt: the ablated one zeroes every listed head's
  // slice of o_proj.input at every step. Saves baseline_logits and ablated_logits (step 0).
  std::string zeroHeads(const HeadSet& heads, const GenerationSettings& g) const;
  // One layer of an ablation sweep: a baseline invoke and one invoke per head of `layer`, one
  // step; saves the probability of `target` as baseline and head_0, head_1, ...
  std::string sweepLayer(int64_t layer, int64_t target, const GenerationSettings& g) const;
  // Logit lens at step 0: for each layer, the top token and its probability at every position,
  // saved as lens[l][0] (probabilities) and lens[l][1] (token ids).
  std::string logitLens(const GenerationSettings& g) const;
  // Gathered q and k after RoPE of one head at step 0: saved as q_head and k_head.
  std::string attentionPattern(int64_t layer, int64_t head, const GenerationSettings& g) const;
  // MoE routing of the first prompt at step 0: for each layer in `sparseLayers`, the top-k
  // (weights, expert ids) the experts module chose from the router logits, saved as route_L, and
  // the router's probability of every expert, saved as router_probs_L.
  std::string routing(const std::vector<int64_t>& sparseLayers, const GenerationSettings& g) const;
  // Baseline and ablated invokes of the first prompt: the ablated one sets `expert`'s router logit
  // in `layer` (mlp.gate.output[0][:, expert]) to -inf at every step, so no token routes to it.
  // Saves baseline_logits and ablated_logits (step 0).
  std::string ablateExpert(int64_t layer, int64_t expert, const GenerationSettings& g) const;

  static std::string quote(const std::string& text);  // a Python string literal

 private:
  std::string header() const;
  std::string traceLine(const GenerationSettings& g, int64_t maxTokens) const;
  std::string layerPath(int64_t layer) const;
  const ModelInfo& model_;
};

}  // namespace shardscope::ui
