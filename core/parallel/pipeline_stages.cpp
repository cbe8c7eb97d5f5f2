#include "pipeline_stages.h"

#include <string>

#include "../error.h"

namespace shardscope {

PipelineStages::PipelineStages(int64_t numLayers, int stages) {
  if (stages < 1)
    throw Error("pipeline_parallel_size must be at least 1, got " + std::to_string(stages));
  if (stages > 1 && numLayers < stages) {
    throw Error("pipeline_parallel_size " + std::to_string(stages) + " needs at least as many " +
                "decoder layers, and the model has " + std::to_string(numLayers) +
                "; use a pipeline_parallel_size of at most " + std::to_string(numLayers));
  }
  std::vector<int64_t> sizes(size_t(stages), numLayers / stages);
  // vLLM: the remainder goes one layer each to partitions[-2], partitions[-3], ...
  const int64_t remaining = numLayers % stages;
  for (int64_t i = 2; i < remaining + 2; ++i) ++sizes[size_t(stages - i)];
  bounds_.assign(1, 0);
  for (int64_t s : sizes) bounds_.push_back(bounds_.back() + s);
}

int PipelineStages::stageOfLayer(int64_t layer) const {
  for (int s = 0; s < count(); ++s) {
    if (layer < end(s)) return s;
  }
  SS_ASSERT(false, "layer outside every stage");
  return last();
}

}  // namespace shardscope
