// SiluAndMul (vLLM's act_fn): x = [gate | up] along the last dimension of this rank's fused
// gate_up output; returns silu(gate) * up, [T, I/tp] (column-sharded).
#pragma once

#include <string>

#include "../forward_batch.h"
#include "../module.h"

namespace shardscope {

class SiluAndMul : public Module {
 public:
  SiluAndMul(std::string name, Module* parent);
  const char* kind() const override { return "SiluAndMul"; }
  at::Tensor forward(const at::Tensor& x, const ForwardBatch& batch) const;
};

}  // namespace shardscope
