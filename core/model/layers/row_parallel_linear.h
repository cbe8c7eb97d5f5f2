// RowParallelLinear (vLLM's name). Y = X A^T + b with A of shape [out, in]; the input dimension of
// A is split across ranks, so each rank multiplies its columns of X ([T, in/tp], the output of
// the column-parallel layer before it) by its slice of A, and an all-reduce sums the partial
// products. The bias is added once, after the reduce. Output (whole) is (out, None). With
// reduceResults off (vLLM's reduce_results=False: DeepSeek's shared experts, summed with the routed
// experts before one reduce) the output is this rank's partial sum.
#pragma once

#include <string>

#include "../forward_batch.h"
#include "../module.h"
#include "tp_rank.h"

namespace shardscope {

class RowParallelLinear : public Module {
 public:
  RowParallelLinear(std::string name, Module* parent, int64_t inFeatures, int64_t outFeatures,
                    bool bias, TpRank tp, bool reduceResults = true);
  const char* kind() const override { return "RowParallelLinear"; }
  void load(LoadContext& ctx, const std::string& prefix);
  // The input is `numHeads` attention heads of `headDim` (o_proj): adds the method
  // head(input, h), head h's columns of the gathered input as a view.
  void declareInputHeads(int64_t numHeads, int64_t headDim);
  // x: [T, in/tp] this rank's columns  ->  [T, out] whole (a partial sum without reduceResults).
  at::Tensor forward(const at::Tensor& x, const ForwardBatch& batch) const;

 private:
  int64_t inPerRank_, out_;
  bool hasBias_;
  bool reduce_;
  TpRank tp_;
  at::Tensor weight_;  // [out, in/tp]
  at::Tensor bias_;    // [out] or undefined
};

}  // namespace shardscope
