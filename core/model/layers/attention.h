// Attention: causal grouped-query attention over each request's KV cache (vLLM's `attn` module).
// This rank holds nq/tp query heads and its KV heads (replicated when tp > n_kv); query head h
// attends with KV head h / (nq / n_kv). Softmax in fp32 as Hugging Face's eager path does.
#pragma once

#include <torch/version.h>

#include <string>

#include "../forward_batch.h"
#include "../module.h"

namespace shardscope {

class Attention : public Module {
 public:
  Attention(std::string name, Module* parent, int64_t layer, int64_t headsPerRank,
            int64_t kvHeadsPerRank, int64_t headDim);
  const char* kind() const override { return "Attention"; }
  // q: [T, nq/tp*d], k, v: [T, nkv/tp*d]  ->  [T, nq/tp*d]. Appends k, v to each span's cache.
  at::Tensor forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                     const ForwardBatch& batch) const;
#if TORCH_VERSION_MAJOR >= 2
  // A decode step's attention once its keys and values are in the cache (batch.decodeSlots set):
  // q [R, nq/tp*d] -> [R, nq/tp*d], without visiting ports.
  at::Tensor attendCached(const at::Tensor& q, const ForwardBatch& batch) const;
#endif
  double scale() const {
    return scale_;
  }
  int64_t layer() const {
    return layer_;
  }

 private:
  at::Tensor attendDecodeBatch(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                               const ForwardBatch& batch) const;
  at::Tensor attendSpan(const at::Tensor& q, const at::Tensor& keys, const at::Tensor& values,
                        int64_t past) const;
  // Prompts of one length from position 0 in consecutive cache slots, on the GPU: their keys and
  // values written in one copy each and one fused attention call over [R, heads, n, d] (the loop
  // over requests launched one a request). Undefined when the batch is not of that shape.
  at::Tensor attendEqualPrompts(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                const ForwardBatch& batch) const;

  int64_t layer_, heads_, kvHeads_, headDim_;
  double scale_;
};

}  // namespace shardscope
