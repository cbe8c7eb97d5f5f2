// LayerStack / LayerReplayer: the seam between a model's decoder layers and a runner that replays
// captured CUDA graphs over runs of them (core/engine/layer_graphs). The replayer covers the layers
// it can (a layer the observer needs, too, when the observer says which ports it waits on); the
// model runs the rest eagerly.
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
  // Replays layers from `begin` on, up to (not including) the first one it cannot replay, or to
  // the end; returns where it stopped: `begin` when it replayed nothing.
  virtual int64_t replay(const LayerStack& stack, int64_t begin, at::Tensor& hidden,
                         at::Tensor& residual, const ForwardBatch& batch) = 0;
  // Layers run from graphs so far (a count for results and benchmarks).
  virtual int64_t layersReplayed() const = 0;
  // Of those, layers replayed in segments cut at the ports an observer waited on.
  virtual int64_t layersSegmented() const { return 0; }
  // Of those, layers whose attention ran fused (the observer waited on no port inside it).
  virtual int64_t layersSegmentedFused() const { return 0; }
};

}  // namespace shardscope
