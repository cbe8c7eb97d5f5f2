// DeepseekScalingRotaryEmbedding (vLLM's name): the rotary embedding of DeepSeek-V2's latent
// attention. It rotates only the rope part of each head (qk_rope_head_dim values) and the one rope
// key a token shares across heads, in the interleaved (GPT-J) convention of HF's deepseek_v2
// apply_rotary_emb: pairs (x[2i], x[2i+1]) are rotated by position * inv_freq[i]. With YaRN
// scaling the frequencies blend interpolation and extrapolation along a ramp between beta_fast
// and beta_slow, and cos/sin carry the magnitude yarn_get_mscale(factor, mscale) /
// yarn_get_mscale(factor, mscale_all_dim) (transformers' _compute_yarn_parameters).
// The angles are computed for the step's positions (DeepSeek's 160k-position tables would cost
// tens of MB per rank). Input positions [T]; output (q_pe [T, heads, rope], k_pe [T, 1, rope]),
// split by heads: k_pe is the same on every rank, so a read shows one copy per shard of query
// heads.
#pragma once

#include <string>
#include <utility>

#include "../forward_batch.h"
#include "../model_config.h"
#include "../module.h"

namespace shardscope {

class DeepseekScalingRotaryEmbedding : public Module {
 public:
  // `output`: how q_pe's heads are split (head-sharded; replicated across a DCP group).
  DeepseekScalingRotaryEmbedding(std::string name, Module* parent, const ModelConfig& config,
                                 ShardSpec output);
  const char* kind() const override { return "DeepseekScalingRotaryEmbedding"; }
  void to(at::Device device);
  // qPe: [T, heads, rope], kPe: [T, 1, rope]  ->  rotated (q_pe, k_pe). Visits input, output.
  std::pair<at::Tensor, at::Tensor> forward(const at::Tensor& positions, const at::Tensor& qPe,
                                            const at::Tensor& kPe, const ForwardBatch& batch) const;

 private:
  at::Tensor rotate(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) const;

  at::Tensor invFreq_;  // [rope/2] fp32
  double magnitude_ = 1.0;
};

// YaRN's magnitude correction, 0.1 * mscale * ln(scale) + 1 (1 for scale <= 1).
double yarnMscale(double scale, double mscale);

// The inverse frequencies [rope/2] (fp32) and the cos/sin magnitude for `config`'s rope part.
std::pair<at::Tensor, double> deepseekRopeFrequencies(const ModelConfig& config);

}  // namespace shardscope
