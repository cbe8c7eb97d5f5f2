// RotaryEmbedding, neox style (rotate halves), as Hugging Face and vLLM apply it to Qwen and Llama;
// with Llama 3 frequency scaling when the config asks for it. cos/sin are precomputed in fp32 for
// every position up to max_position_embeddings. Input: positions [T]; output (q, k), head-sharded.
#pragma once

#include <string>
#include <utility>

#include "../forward_batch.h"
#include "../model_config.h"
#include "../module.h"

namespace shardscope {

class RotaryEmbedding : public Module {
 public:
  RotaryEmbedding(std::string name, Module* parent, const ModelConfig& config);
  const char* kind() const override { return "RotaryEmbedding"; }
  void to(at::Device device);
  // Casts the cos/sin tables to the model's activation dtype once (HF casts them every call).
  void setActivationDtype(at::ScalarType dtype);
  // q: [T, nq*d/tp], k: [T, nkv*d/tp]  ->  rotated (q, k).
  std::pair<at::Tensor, at::Tensor> forward(const at::Tensor& positions, const at::Tensor& q,
                                            const at::Tensor& k, const ForwardBatch& batch) const;
  // The [maxPositions, d/2] tables in the activation dtype (for fused kernels).
  const at::Tensor& cosTable() const { return cos_; }
  const at::Tensor& sinTable() const { return sin_; }

 private:
  at::Tensor rotate(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) const;
  std::pair<at::Tensor, at::Tensor> tables(at::Device device, at::ScalarType dtype) const;

  int64_t headDim_;
  ModelConfig config_;
  at::Tensor cos_, sin_;  // [maxPositions, d/2], read by every layer; fp32 until cast
};

}  // namespace shardscope
