// LayerStack / LayerReplayer: the seam between a model's decoder layers and a runner that replays
// captured CUDA graphs over runs of them (core/engine/layer_graphs). The model runs a layer
// eagerly whenever the step's observer needs one of its ports; the replayer covers the rest.
#pragma once

#include <ATen/ATen.h>

namespace shardscope {

struct ForwardBatch;

// The decoder layers of a model, run one at a time.
class LayerStack {
 public:
  virtual ~LayerStack() = default;
  virtual int64_t numLayers() const = 0;
  // Runs layer i eagerly, updating (hidden, residual); residual is undefined before layer 0.
  virtual void runLayer(int64_t i, at::Tensor& hidden, at::Tensor& residual,
                        const ForwardBatch& batch) const = 0;
};

// The most tokens a step may have for its layers to be recorded (larger steps are compute-bound
// and run eagerly).
constexpr int64_t kMaxRecordedTokens = 256;

class LayerReplayer {
 public:
  virtual ~LayerReplayer() = default;
  // Replays layers from `begin` up to (not including) the first one the step's observer needs, or
  // to the end; returns where it stopped: `begin` when it replayed nothing.
  virtual int64_t replay(const LayerStack& stack, int64_t begin, at::Tensor& hidden,
                         at::Tensor& residual, const ForwardBatch& batch) = 0;
  // Layers run from graphs so far (a count for results and benchmarks).
  virtual int64_t layersReplayed() const = 0;
};

}  // namespace shardscope
