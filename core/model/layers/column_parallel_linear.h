// Column-parallel linear layers (vLLM's names). Y = X A^T + b with A of shape [out, in]; the output
// dimension of A (and b) is split across ranks, so each rank computes Y's columns
// [rank*out/tp, (rank+1)*out/tp) and returns them ungathered as (out_local, None).
//   ColumnParallelLinear        one weight split evenly.
//   MergedColumnParallelLinear  several weights (gate_proj, up_proj) split each, then fused per
//                               rank: rank r holds [gate_r | up_r].
//   QKVParallelLinear           q_proj, k_proj, v_proj split by heads and fused per rank:
//                               [q_r | k_r | v_r]. When tp exceeds the KV heads, KV heads are
//                               replicated: rank r holds KV head r / (tp / n_kv) (HeadLayout).
#pragma once

#include <string>
#include <vector>

#include "../../parallel/head_layout.h"
#include "../forward_batch.h"
#include "../module.h"
#include "tp_rank.h"

namespace shardscope {

class ColumnParallelLinear : public Module {
 public:
  ColumnParallelLinear(std::string name, Module* parent, int64_t inFeatures, int64_t outFeatures,
                       bool bias, TpRank tp);

  const char* kind() const override { return "ColumnParallelLinear"; }
  // Loads the shard of `<prefix>.weight` (and `.bias`).
  virtual void load(LoadContext& ctx, const std::string& prefix);
  // x: [T, in] whole  ->  [T, out/tp] this rank's columns. Visits input and output.
  at::Tensor forward(const at::Tensor& x, const ForwardBatch& batch) const;

  int64_t outPerRank() const { return outPerRank_; }
  const at::Tensor& weight() const { return weight_; }  // [out/tp, in]
  const at::Tensor& bias() const { return bias_; }

 protected:
  // Loads one HF tensor's row range [start, start+len) and appends it to the fused shard.
  void setShard(at::Tensor weight, at::Tensor bias, std::vector<int64_t> fullShape);

  int64_t in_;
  int64_t outPerRank_;
  bool hasBias_;
  TpRank tp_;          // the shard this rank loads: rank `tp_.rank` of `tp_.size` shards
  int replicas_ = 1;   // ranks holding each shard (DCPGroupColumnParallelLinear)
  at::Tensor weight_;  // [out/tp, in]
  at::Tensor bias_;    // [out/tp] or undefined
};

class MergedColumnParallelLinear : public ColumnParallelLinear {
 public:
  // `parts` are the HF sub-layer names fused here, each of `outEach` features.
  MergedColumnParallelLinear(std::string name, Module* parent, int64_t inFeatures, int64_t outEach,
                             std::vector<std::string> parts, bool bias, TpRank tp);
  const char* kind() const override { return "MergedColumnParallelLinear"; }
  // `prefix` is the parent in HF naming ("model.layers.0.mlp"); parts are appended to it.
  void load(LoadContext& ctx, const std::string& prefix) override;

 private:
  int64_t outEach_;
  std::vector<std::string> parts_;
};

class QKVParallelLinear : public ColumnParallelLinear {
 public:
  QKVParallelLinear(std::string name, Module* parent, int64_t hidden, int64_t headDim,
                    int64_t numHeads, int64_t numKvHeads, bool bias, TpRank tp);
  const char* kind() const override { return "QKVParallelLinear"; }
  // `prefix` is the attention block in HF naming ("model.layers.0.self_attn").
  void load(LoadContext& ctx, const std::string& prefix) override;

  int64_t headsPerRank() const { return layout_.qHeadsPerRank(); }
  int64_t kvHeadsPerRank() const { return layout_.kvHeadsPerRank(); }
  int kvReplicas() const { return layout_.kvReplicas(); }
  const HeadLayout& headLayout() const { return layout_; }

 private:
  // q_head / k_head / v_head(output, head): one head's columns of the gathered output, a view.
  void addHeadMethod(const char* name, HeadPart part);

  HeadLayout layout_;
};

}  // namespace shardscope
