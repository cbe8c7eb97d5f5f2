// LayerGraphs: decoder layers replayed as CUDA graphs, vLLM's way of taking the host out of a
// launch-bound step, in segments broken where the trace needs to see a port: the layers an
// observer waits on run eagerly (their ports visited as always), every run of layers between them
// replays one graph. Decode steps and small prefills (up to kMaxTokens tokens) are recorded, keyed
// by the segment and the step's layout (requests, tokens, cached lengths, attended keys), the first
// time they are needed and kept for later steps and generations. Built only with LibTorch's CUDA.
#pragma once

#include <ATen/ATen.h>

#include <map>
#include <memory>
#include <vector>

#include "../model/forward_batch.h"
#include "../model/layer_replayer.h"
#include "../parallel/process_group.h"

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

 private:
  struct Graph;
  struct StepInputs {  // the step's device tensors, at the addresses the graphs read
    at::Tensor positions, slots;
  };
  using Layout = std::vector<int64_t>;

  static Layout layoutOf(const ForwardBatch& batch);
  StepInputs& inputs(const Layout& layout, const ForwardBatch& batch);
  std::unique_ptr<Graph> record(const LayerStack& stack, int64_t begin, int64_t end,
                                const at::Tensor& hidden, const at::Tensor& residual,
                                StepInputs& in, const ForwardBatch& batch);

  ProcessGroup& group_;
  at::Device device_;
  std::map<Layout, StepInputs> inputs_;
  std::map<Layout, std::unique_ptr<Graph>> graphs_;  // by {begin, end} + layout
  struct Pool;
  std::unique_ptr<Pool> pool_;
  int64_t layersReplayed_ = 0;
};

}  // namespace shardscope
