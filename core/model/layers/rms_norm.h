// RMSNorm with vLLM's fused residual add. Called with x alone it returns normed(x); called with
// (x, residual) it first forms residual' = x + residual and returns (normed(residual'), residual'),
// so the sum of a decoder layer's two outputs is the residual stream. Replicated on every rank.
// Also used per head ([T, heads, d], normalising the last dimension) for Qwen3's q_norm/k_norm.
#pragma once

#include <string>
#include <utility>

#include "../forward_batch.h"
#include "../module.h"
#include "tp_rank.h"

namespace shardscope {

class RMSNorm : public Module {
 public:
  RMSNorm(std::string name, Module* parent, int64_t dim, double eps,
          ShardSpec ports = ShardSpec::whole());
  const char* kind() const override { return "RMSNorm"; }
  // norm(x) from a trace: the normalisation alone.
  bool callableWithWhole() const override { return true; }
  std::vector<at::Tensor> callWhole(const ModuleCall& call) const override;
  void load(LoadContext& ctx, const std::string& hfName);

  at::Tensor forward(const at::Tensor& x, const ForwardBatch& batch) const;
  std::pair<at::Tensor, at::Tensor> forward(const at::Tensor& x, const at::Tensor& residual,
                                            const ForwardBatch& batch) const;
  // The normalisation alone, without visiting ports (HF's arithmetic: fp32 statistics).
  at::Tensor apply(const at::Tensor& x) const;
  const at::Tensor& weight() const { return weight_; }
  double eps() const { return eps_; }

 private:
  int64_t dim_;
  double eps_;
  at::Tensor weight_;  // [dim]
};

}  // namespace shardscope
