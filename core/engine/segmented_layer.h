// SegmentedLayer: a decoder layer that a trace observes, recorded as CUDA graph segments cut at
// its ports, so that reading or writing one port costs that port's own work instead of an eager
// layer (issue 15, target 3: about 30 launches and a host wait on each collective). The recording
// runs the module-by-module path, which visits every port; a replay launches the segments between
// the ports the observer waits on as one graph (a composition of the recorded segments, kept per
// range) and visits only those ports. A fused recording runs attention's fused decode path (the
// q/k norms, rotary, cache write and attention as two kernels, about ten fewer): it serves an
// observer that waits on none of the ports inside attention, nor on a port before them. Built only
// with LibTorch's CUDA.
#pragma once

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAStream.h>

#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "../model/forward_batch.h"
#include "../model/layer_replayer.h"

namespace shardscope {

class SegmentedLayer {
 public:
  using PoolId = decltype(at::cuda::graph_pool_handle());

  // Records layer `layer` of `stack` from (hidden, residual) on `capture` (the rank's
  // CaptureStream), after `warmups` eager runs there, ordered after the current stream's work;
  // `fixed` is the step's batch with its inputs at the addresses the graphs read (its observer and
  // replayer are replaced). Memory comes from `pool`. `fused`: the fused recording
  // (ForwardBatch::fuseAttentionUnderObserver).
  SegmentedLayer(const LayerStack& stack, int64_t layer, const at::Tensor& hidden,
                 const at::Tensor& residual, ForwardBatch fixed, PoolId pool,
                 c10::cuda::CUDAStream capture, int warmups, bool fused);
  ~SegmentedLayer();
  SegmentedLayer(const SegmentedLayer&) = delete;
  SegmentedLayer& operator=(const SegmentedLayer&) = delete;

  // Whether a replay can serve what `observer` waits on at `step`: it waits on no port the
  // recording skipped, nor on one before the last of those (a port it waits on next comes after
  // them then, so a skipped one is never waited on during the replay). Always, when none was
  // skipped.
  bool serves(const PortObserver& observer, int64_t step) const;
  // Whether the recording skipped ports (its attention ran fused).
  bool skipsPorts() const { return lastSkipped_ >= 0; }

  // Replays the layer on (hidden, residual), updating them. Ports `batch.observer` waits on are
  // visited with copies of their values (a later replay overwrites the buffers; a write is copied
  // back); the others are reported passed. Nothing waits for the launches (the caller does).
  void replay(at::Tensor& hidden, at::Tensor& residual, const ForwardBatch& batch);

 private:
  struct Port {
    const Module* module = nullptr;
    PortRole role = PortRole::Input;
    PortValue value;       // the recorded buffers
    size_t boundary = 0;   // segments that run before this port
    bool skipped = false;  // passed unvisited while recording (no buffers)
  };
  struct Launchable;
  class Recorder;

  void launch(size_t first, size_t last);

  int64_t layer_ = 0;
  int64_t lastSkipped_ = -1;  // index in ports_ of the last skipped port
  at::Tensor hiddenIn_, residualIn_, hiddenOut_, residualOut_;
  std::vector<std::unique_ptr<at::cuda::CUDAGraph>> segments_;
  std::vector<Port> ports_;
  std::map<std::pair<size_t, size_t>, std::unique_ptr<Launchable>> launchables_;
};

}  // namespace shardscope
