// ReplicatedLinear (vLLM's name; Qwen3-MoE's router `mlp.gate`). Y = X A^T with A of shape
// [out, in] held whole on every rank, so every rank computes the same whole Y from the same whole
// X: nothing to gather and nothing to reduce. Output (whole) is (out, None), as vLLM's.
#pragma once

#include <string>

#include "../forward_batch.h"
#include "../module.h"
#include "tp_rank.h"

namespace shardscope {

class ReplicatedLinear : public Module {
 public:
  ReplicatedLinear(std::string name, Module* parent, int64_t inFeatures, int64_t outFeatures);
  const char* kind() const override { return "ReplicatedLinear"; }
  // Loads `<prefix>.weight` whole.
  void load(LoadContext& ctx, const std::string& prefix);
  // x: [T, in] whole  ->  [T, out] whole. Visits input and output.
  at::Tensor forward(const at::Tensor& x, const ForwardBatch& batch) const;
  const at::Tensor& weight() const { return weight_; }

 private:
  int64_t in_, out_;
  at::Tensor weight_;  // [out, in]
};

}  // namespace shardscope
