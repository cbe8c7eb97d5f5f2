// DecodeState: what a rank keeps from one generation to the next so that steps replay the CUDA
// graphs captured before: the KV cache (grown when a generation needs more, never shrunk,
// cleared before each use) and the graphs recorded over it, dropped whenever the cache moves.
#pragma once

#include <ATen/ATen.h>

#include <memory>

#include "../model/kv_cache.h"
#include "../model/layer_replayer.h"
#include "../parallel/pipeline_stages.h"
#include "../parallel/process_group.h"

namespace shardscope {

class DecodeState {
 public:
  // `cudaGraphs`: replay decode steps as CUDA graphs where the device and group allow it.
  explicit DecodeState(bool cudaGraphs) : cudaGraphs_(cudaGraphs) {}
  ~DecodeState();

  // A cleared cache with room for `requests` rows of `capacity` tokens (this rank's share of
  // them under decode-context parallelism) in the layers of this rank's stage, laid out as the
  // model asks.
  KvCache& cache(const StageRank& stage, const KvCacheLayout& layout, int64_t requests,
                 int64_t capacity, at::TensorOptions options);
  // The graph runner for this rank's GPU steps, or nullptr (CPU, graphs off, a group that
  // cannot be captured, LibTorch without CUDA).
  LayerReplayer* replayer(ProcessGroup& group, at::Device device);
  // After a failed job: nothing captured during it is trusted again.
  void reset();

 private:
  bool cudaGraphs_;
  std::unique_ptr<KvCache> cache_;
  std::unique_ptr<LayerReplayer> graphs_;
};

}  // namespace shardscope
