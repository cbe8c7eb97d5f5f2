// Hugging Face's MoE expert loop as a reference for the suites that check expert kernels
// (tst_moe_kernels on the GPU, tst_grouped_experts on the CPU).
#pragma once

#include <ATen/ATen.h>

namespace shardscope::test {

// Hugging Face's expert loop (Qwen3MoeExperts): experts in increasing order, each chosen one's
// SwiGLU on its tokens, scaled by the routing weight and index_add_-ed into zeros; only experts
// [first, first + w13.size(0)) count (a rank's share under expert parallelism).
inline at::Tensor referenceMoe(const at::Tensor& x, const at::Tensor& weights,
                               const at::Tensor& ids, const at::Tensor& w13, const at::Tensor& w2,
                               int64_t first) {
  const int64_t I = w2.size(2);
  at::Tensor y = at::zeros_like(x);
  at::Tensor idsCpu = ids.cpu();
  for (int64_t e = 0; e < w13.size(0); ++e) {
    const at::Tensor hit = idsCpu.eq(first + e).nonzero();  // [n, 2]: (token, choice)
    if (hit.size(0) == 0) continue;
    const at::Tensor tokens = hit.select(1, 0).to(x.device()),
                     choice = hit.select(1, 1).to(x.device());
    const at::Tensor gu = at::matmul(x.index_select(0, tokens), w13[e].t());
    const at::Tensor h = at::silu(gu.narrow(-1, 0, I)) * gu.narrow(-1, I, I);
    const at::Tensor w = weights.index({tokens, choice}).unsqueeze(1);
    y.index_add_(0, tokens, at::matmul(h, w2[e].t()) * w);
  }
  return y;
}

}  // namespace shardscope::test
