// DecodeGraphs: decode steps replayed as CUDA graphs, vLLM's way of taking the host out of a
// memory-bound step, in segments broken where the trace needs to see a port: the layers an
// observer waits on run eagerly (their ports visited as always), every run of layers between them
// replays one graph. A graph is recorded the first time its segment (first layer, end layer,
// requests, attended keys) is needed and kept for later steps and generations. Built only with
// LibTorch's CUDA.
#pragma once

#include <ATen/ATen.h>

#include <map>
#include <memory>
#include <tuple>

#include "../model/forward_batch.h"
#include "../model/layer_replayer.h"
#include "../parallel/process_group.h"

namespace shardscope {

class DecodeGraphs : public LayerReplayer {
 public:
  DecodeGraphs(ProcessGroup& group, at::Device device);
  ~DecodeGraphs() override;

  int64_t replay(const LayerStack& stack, int64_t begin, at::Tensor& hidden, at::Tensor& residual,
                 const ForwardBatch& batch) override;
  int64_t layersReplayed() const override { return layersReplayed_; }

 private:
  struct Graph;
  struct StepInputs {  // the step's per-request tensors, at the addresses the graphs read
    at::Tensor positions, slots, mask;
  };
  using Key = std::tuple<int64_t, int64_t, int64_t, int64_t>;  // begin, end, requests, span

  StepInputs& inputs(const ForwardBatch& batch);
  std::unique_ptr<Graph> record(const LayerStack& stack, int64_t begin, int64_t end,
                                const at::Tensor& hidden, const at::Tensor& residual,
                                const ForwardBatch& batch);

  ProcessGroup& group_;
  at::Device device_;
  std::map<std::pair<int64_t, int64_t>, StepInputs> inputs_;  // by (requests, span)
  std::map<Key, std::unique_ptr<Graph>> graphs_;
  struct Pool;
  std::unique_ptr<Pool> pool_;
  int64_t layersReplayed_ = 0;
};

}  // namespace shardscope
