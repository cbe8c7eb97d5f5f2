// LayerGraphs: decoder layers replayed as CUDA graphs, vLLM's way of taking the host out of a
// launch-bound step, in segments broken where the trace needs to see a port: every run of layers
// no observer needs replays one graph; a layer it needs replays as segments cut at its ports
// (SegmentedLayer) when the observer can say which ports it waits on, else runs eagerly. Decode
// steps and small prefills (up to kMaxTokens tokens) are recorded, keyed by the segment and the
// step's layout (requests, tokens, cached lengths, attended keys), the first time they are needed
// and kept for later steps and generations. Built only with LibTorch's CUDA.
#pragma once

#include <ATen/ATen.h>

#include <map>
#include <memory>
#include <vector>

#include "../model/forward_batch.h"
#include "../model/layer_replayer.h"
#include "../parallel/process_group.h"
#include "capture_stream.h"
#include "segmented_layer.h"

namespace shardscope {

class LayerGraphs : public LayerReplayer {
 public:
  static constexpr int64_t kMaxTokens = kMaxRecordedTokens;
  static constexpr size_t kMaxGraphs = 512;  // then new layouts run eagerly
  // Eager runs of a segment before its capture; SHARDSCOPE_GRAPH_WARMUPS=N overrides it (N=1
  // shows issue 14's failure again, for its regression test).
  static constexpr int kWarmups = 3;

  LayerGraphs(ProcessGroup& group, at::Device device);
  ~LayerGraphs() override;

  int64_t replay(const LayerStack& stack, int64_t begin, at::Tensor& hidden, at::Tensor& residual,
                 const ForwardBatch& batch) override;
  int64_t layersReplayed() const override { return layersReplayed_; }
  int64_t layersSegmented() const override { return layersSegmented_; }
  int64_t layersSegmentedFused() const override { return layersSegmentedFused_; }

 private:
  struct Graph;
  struct StepInputs {  // the step's device tensors, at the addresses the graphs read
    at::Tensor positions, slots;
    uint64_t filledBy = 0;  // the replay() call that last copied the step's tensors in
  };
  using Layout = std::vector<int64_t>;

  static Layout layoutOf(const ForwardBatch& batch);
  StepInputs& inputs(const Layout& layout, const ForwardBatch& batch);
  std::unique_ptr<Graph> record(const LayerStack& stack, int64_t begin, int64_t end,
                                const at::Tensor& hidden, const at::Tensor& residual,
                                StepInputs& in, const ForwardBatch& batch);
  // Where the run of whole layers from `begin` ends (the first layer the observer needs or a
  // failure targets); -1 when the observer cannot tell.
  static int64_t wholeLayersEnd(int64_t begin, int64_t layers, const ForwardBatch& batch);
  // Layers [begin, end) as one graph; false when no more graphs may be recorded.
  bool replayWhole(const LayerStack& stack, int64_t begin, int64_t end, at::Tensor& hidden,
                   at::Tensor& residual, const ForwardBatch& batch);
  // Layer `layer` in segments cut at its ports; false when it must run eagerly.
  bool replaySegmented(const LayerStack& stack, int64_t layer, at::Tensor& hidden,
                       at::Tensor& residual, const ForwardBatch& batch);
  // The layer's recording for this step (its fused one when that serves the observer), recorded
  // the first time; null when no more graphs may be recorded.
  SegmentedLayer* segmentsFor(const LayerStack& stack, int64_t layer, const at::Tensor& hidden,
                              const at::Tensor& residual, const ForwardBatch& batch);
  SegmentedLayer* recorded(const LayerStack& stack, int64_t layer, const at::Tensor& hidden,
                           const at::Tensor& residual, const ForwardBatch& batch, bool fused);

  ProcessGroup& group_;
  at::Device device_;
  std::map<Layout, StepInputs> inputs_;
  uint64_t replayCalls_ = 0;  // replay() calls so far: the step's tensors are copied once a call
  std::map<Layout, std::unique_ptr<Graph>> graphs_;              // by {begin, end} + layout
  std::map<Layout, std::unique_ptr<SegmentedLayer>> segmented_;  // by {layer, fused} + layout
  struct Pool;
  std::unique_ptr<Pool> pool_;
  CaptureStream capture_;  // every graph of this rank is recorded on it
  int64_t layersReplayed_ = 0;
  int64_t layersSegmented_ = 0;
  int64_t layersSegmentedFused_ = 0;
};

}  // namespace shardscope
