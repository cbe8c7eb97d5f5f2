// StepDecision: what the sampling rank decided after one step, as every rank sees it:
// [ids R][cancel][NaN R] (R: the step's requests). Made on the host by the sampler (any
// sampling, a trace watching), or, for greedy steps nobody watches, on the device without a host
// wait (decideOnDevice): then the ids stay on the device as the next step's input while the copy
// to the host is in flight, and the host reads the decision one step later (decode-ahead).
#pragma once

#include <ATen/ATen.h>
#include <c10/core/Event.h>

#include <memory>
#include <vector>

#include "../model/forward_batch.h"
#include "rank_context.h"
#include "sampler.h"

namespace shardscope {

class StepDecision {
 public:
  StepDecision(std::vector<size_t> active, at::Tensor host, at::Tensor deviceIds = {},
               std::unique_ptr<c10::Event> copied = nullptr);

  // The step's requests (indices into the generation's requests), in row order.
  const std::vector<size_t>& active() const { return active_; }
  // [R] int64 on the device, or undefined when the decision was made on the host.
  const at::Tensor& deviceIds() const { return deviceIds_; }
  // Returns once the decision is on the host (the accessors below read it); `group` ends the
  // wait if it aborts.
  void wait(ProcessGroup& group);

  int64_t id(size_t row) const { return host_.data_ptr<int64_t>()[row]; }
  bool cancel() const { return host_.data_ptr<int64_t>()[active_.size()] != 0; }
  bool nonFinite(size_t row) const {
    return host_.data_ptr<int64_t>()[active_.size() + 1 + row] != 0;
  }

 private:
  std::vector<size_t> active_;
  at::Tensor host_;
  at::Tensor deviceIds_;
  std::unique_ptr<c10::Event> copied_;
};

// The sampler's choice from `logits` ([R, V], the sampling rank's) with `samplers` of the active
// requests, sent to every rank of `everyRank`; an observer sees (and may overwrite) it as
// model.samples. The host waits for it.
StepDecision decideOnHost(RankContext& ctx, ProcessGroup& everyRank, const at::Tensor& logits,
                          std::vector<size_t> active, std::vector<Sampler>& samplers,
                          const SamplingParams& sp, const ForwardBatch& batch);

// Greedy: the argmax and the NaN flags computed on the device, sent to every rank there, copied
// to the host without a wait; an observer of `batch` sees (and may overwrite) the ids as
// model.samples, on the device.
StepDecision decideOnDevice(RankContext& ctx, ProcessGroup& everyRank, const at::Tensor& logits,
                            std::vector<size_t> active, const ForwardBatch& batch);

}  // namespace shardscope
