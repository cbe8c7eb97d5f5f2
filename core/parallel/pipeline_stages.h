// PipelineStages: how decoder layers are split into pipeline stages (vLLM's pipeline_parallel_size)
// and where this rank sits in the T x P grid. Layers are split as vLLM's get_pp_indices does
// (without VLLM_PP_LAYER_PARTITION): L / P layers a stage, and the L % P remaining layers one each
// to the stages before the last, counting back from the second to last (the last stage also holds
// the final norm and the LM head). The embedding lives on the first stage.
//
// Ranks are numbered as vLLM numbers them: world rank = stage * T + tensor-parallel rank.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace shardscope {

class PipelineStages {
 public:
  PipelineStages() = default;  // one stage, no layers
  PipelineStages(int64_t numLayers, int stages);

  int count() const { return int(bounds_.size()) - 1; }
  // Layers [begin(s), end(s)) run on stage s.
  int64_t begin(int stage) const { return bounds_[std::size_t(stage)]; }
  int64_t end(int stage) const { return bounds_[std::size_t(stage) + 1]; }
  // The stage that holds decoder layer `layer`.
  int stageOfLayer(int64_t layer) const;
  int last() const { return count() - 1; }

 private:
  std::vector<int64_t> bounds_{0, 0};  // count() + 1 entries
};

// One rank's place in the grid of T tensor-parallel ranks by P stages.
struct StageRank {
  PipelineStages stages;
  int stage = 0;

  bool first() const { return stage == 0; }
  bool last() const { return stage == stages.last(); }
  bool holdsLayer(int64_t layer) const {
    return layer >= stages.begin(stage) && layer < stages.end(stage);
  }
  int64_t firstLayer() const { return stages.begin(stage); }
  int64_t layers() const { return stages.end(stage) - stages.begin(stage); }
};

}  // namespace shardscope
