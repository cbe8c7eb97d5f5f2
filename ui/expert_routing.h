// ExpertRouting: which experts each token chose in each MoE layer, read from a routing run's saved
// values (ScriptBuilder::routing saves route_L = mlp.experts.select_experts(mlp.gate.output) of
// each sparse layer L: route_L[0] the top-k weights, route_L[1] the expert ids, both [T, k]; and
// router_probs_L, the softmax of the router logits in fp32, [T, E]).
// Plain data for the routing view; no LibTorch.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "core/engine/engine_types.h"
#include "core/trace/trace_record.h"

namespace shardscope::ui {

struct ExpertRouting {
  std::vector<int64_t> layers;  // the sparse layers, ascending; row r of the view is layers[r]
  int64_t tokens = 0;
  int64_t topK = 0;
  // Per layer (as `layers`), row-major [tokens, topK], highest weight first as select_experts
  // returns them.
  std::vector<std::vector<int64_t>> experts;
  std::vector<std::vector<double>> weights;
  // Per layer, row-major [tokens, numExperts]: the router's probability of every expert (before
  // top-k and renormalisation). Empty, with numExperts 0, for runs that did not save them
  // (routing runs recorded before the view showed them).
  int64_t numExperts = 0;
  std::vector<std::vector<double>> probabilities;

  int64_t expert(size_t row, int64_t token, int64_t choice) const {
    return experts[row][size_t(token * topK + choice)];
  }
  double weight(size_t row, int64_t token, int64_t choice) const {
    return weights[row][size_t(token * topK + choice)];
  }
  bool hasProbabilities() const { return numExperts > 0; }
  double probability(size_t row, int64_t token, int64_t expert) const {
    return probabilities[row][size_t(token * numExperts + expert)];
  }
  // The router probability the chosen experts of (row, token) hold together.
  double chosenMass(size_t row, int64_t token) const;
  // Per expert e in [0, numExperts): how many of the tokens chose e at row `row`.
  std::vector<int64_t> load(size_t row, int64_t numExperts) const;
};

// The routing a run saved, or nullopt when it saved none (or shapes disagree between layers).
std::optional<ExpertRouting> expertRoutingOf(const trace::RunResult& r);

// The highest expert id the routing chose (-1 when empty).
int64_t maxExpert(const ExpertRouting& routing);

// The decoder layers whose mlp is a sparse MoE block (they have an mlp.experts module).
std::vector<int64_t> sparseLayers(const ModelInfo& model);

}  // namespace shardscope::ui
