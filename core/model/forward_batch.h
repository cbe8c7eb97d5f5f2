// ForwardBatch: what one model step sees. Tokens of all scheduled requests are flattened into one
// [T] batch as vLLM does (a prefill step holds every prompt token, a decode step one token per
// request); each request's rows are a contiguous span with its own KV cache.
#pragma once

#include <ATen/ATen.h>

#include <vector>

#include "../parallel/process_group.h"
#include "failure_injection.h"
#include "kv_cache.h"
#include "layer_replayer.h"
#include "port_observer.h"

namespace shardscope {

struct SequenceSpan {
  int64_t tokenStart = 0;  // first row of this request in the flattened batch
  int64_t tokenCount = 0;
  int64_t pastLength = 0;  // tokens already in the cache before this step
  KvCache* cache = nullptr;
  int64_t request = 0;  // index of the request in the job (its invoke)
  int64_t slot = 0;     // the request's row in the cache
};

struct ForwardBatch {
  ProcessGroup& group;
  at::Tensor positions;  // [T] int64, on the model's device
  std::vector<SequenceSpan> spans;
  PortObserver* observer = nullptr;
  int64_t step = 0;
  // Set when every span is one decode token in one shared cache (a token's position is then its
  // request's cached length): the spans' cache slots as [R] int64 on the device and the number of
  // cached keys every request may attend over (the longest request's, rounded up so that CUDA
  // graphs are reused); built once per step, so attention runs batched.
  at::Tensor decodeSlots{};
  int64_t decodeSpan = 0;
  bool decodeSlotsInOrder = false;  // slots are 0..R-1: the cache rows are read as a view
  // Replays CUDA graphs over the decoder layers the observer does not need (GPU steps).
  LayerReplayer* replayer = nullptr;
  // Set while a layer is recorded as graph segments for observers that wait on no port inside
  // attention (SegmentedLayer's fused recording): a decode step's attention then takes the fused
  // path under the observer too, and reports the ports it skips as passed.
  bool fuseAttentionUnderObserver = false;
  // The test hook (core/model/failure_injection.h), or nullptr.
  const FailureInjection* failure = nullptr;
  // This rank among every rank of every pipeline stage (the failure hook names it); -1: the
  // group's rank.
  int worldRank = -1;

  int64_t numTokens() const { return positions.size(0); }
  // The hook point: one branch when nothing listens.
  void visit(const Module& m, PortRole role, PortValue& v) const {
    if (observer) [[unlikely]]
      observer->visit(m, role, v, *this);
  }
};

}  // namespace shardscope
