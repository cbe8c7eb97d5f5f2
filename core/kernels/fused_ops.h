// Fused CUDA ops on ATen tensors (CUDA builds: SHARDSCOPE_WITH_CUDA_KERNELS). Each replaces a chain
// of elementwise ATen kernels inside one module, between its port visits, with one launch on the
// current stream (so it is recorded into CUDA graphs like any other op). `usable` says whether a
// tensor can take the fused path (on a GPU, fp32/bf16/fp16); the callers keep the ATen chain for
// everything else (the CPU, other dtypes), which is the reference the GPU tests compare against.
#pragma once

#include <ATen/ATen.h>

#include <utility>

namespace shardscope::fused {

// x is on a GPU in fp32/bf16/fp16 and, when `like` is given, has its dtype and device.
bool usable(const at::Tensor& x, const at::Tensor& like = {});

// weight * round(x * rsqrt(mean(x^2) + eps)) over the last dim; x is [..., dim] or a strided
// [T, heads, dim] view whose rows are contiguous (the q or k part of a fused qkv row).
at::Tensor rmsNorm(const at::Tensor& x, const at::Tensor& weight, double eps);

// (rmsNorm(x + residual), x + residual): the residual stream's add and the next norm in one pass.
std::pair<at::Tensor, at::Tensor> addRmsNorm(const at::Tensor& x, const at::Tensor& residual,
                                             const at::Tensor& weight, double eps);

// q [T, qHeads * d] and k [T, kHeads * d] (rows may be strided) rotated at `positions` with the
// [maxPositions, d / 2] cos/sin tables of their dtype; new contiguous tensors.
std::pair<at::Tensor, at::Tensor> rotary(const at::Tensor& q, const at::Tensor& k,
                                         const at::Tensor& cos, const at::Tensor& sin,
                                         const at::Tensor& positions, int64_t headDim);

// silu(x[..., :n]) * x[..., n:] for x [..., 2n].
at::Tensor siluAndMul(const at::Tensor& x);

// x w^T (+ bias) by the GEMV kernel when x is a few rows (a decode step) that it can take;
// undefined otherwise, and the caller's matmul runs.
at::Tensor gemv(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias = {});

// The GEMV of a decoder layer's unobserved step with the kernels before and after it folded in
// (kernels::GemvArgs): with normWeight, x [rows, k] is first normed as rmsNorm (addRmsNorm when
// residual is given: residualSum gets x + residual); with swiGlu, w is [gate; up] ([2n, k]) and y
// [rows, n] is siluAndMul of the product. Equal bit for bit to those ops run one by one. y is
// undefined when the kernel does not take the shapes (more than kMaxGemvRows rows, widths that are
// not a multiple of 16 bytes, rows too wide for shared memory): the caller runs the ops one by one.
struct GemvInput {
  at::Tensor x, residual, normWeight;
  double eps = 1e-6;
  at::Tensor w, bias;
  bool swiGlu = false;
};
struct GemvOutput {
  at::Tensor y, residualSum;
};
GemvOutput gemvFused(const GemvInput& in);

// Whether layers fold norms and SwiGLU into their GEMVs (gemvFused): on unless the environment
// sets SHARDSCOPE_FUSED_DECODE=0 (core/runtime_switches.h).
bool layerFusion();

// A decode step's q/k norms, rotary and KV cache write in one kernel: from the fused qkv rows
// [R, (qHeads + 2 kvHeads) * d] of R requests (one token each, at `positions`, in cache rows
// `slots`), k and v go into the layer's caches [slots, capacity, kvHeads, d]; returns q
// [R, qHeads * d], normed and rotated. Norm weights may be undefined (no q/k norm).
struct QkvToCache {
  at::Tensor qkv;
  int64_t qHeads = 0, kvHeads = 0, headDim = 0;
  at::Tensor qNorm, kNorm;
  double eps = 1e-6;
  at::Tensor cos, sin, positions, slots;
  at::Tensor keyCache, valueCache;
};
at::Tensor qkvToCache(const QkvToCache& in);

// qkvToCache and decodeAttention in one kernel (the same cache and output, bit for bit) when the
// step's `span` fits one chunk of keys; undefined otherwise, or when SHARDSCOPE_FUSED_ATTENTION=0
// (core/runtime_switches.h): then the caller runs the two.
at::Tensor qkvDecodeAttention(const QkvToCache& in, int64_t span, double scale);

// Attention of R new tokens over their cached keys 0..positions[r] (split into chunks of keys
// when `span`, the keys the step may attend, is long); q [R, qHeads * d] -> [R, qHeads * d].
// Undefined when the kernel does not take the shape (the caller's SDPA runs).
at::Tensor decodeAttention(const at::Tensor& q, const at::Tensor& keyCache,
                           const at::Tensor& valueCache, const at::Tensor& slots,
                           const at::Tensor& positions, int64_t kvHeads, int64_t span,
                           double scale);

// How FusedMoE's router chooses (Hugging Face's Qwen3MoeSparseMoeBlock; DeepSeek-V2's greedy
// top-k): softmax of the router logits in fp32, the top k by decreasing probability, divided by
// their sum when normTopkProb, times scale, cast to the logits' dtype.
struct MoeRouting {
  int64_t topK = 0;
  bool normTopkProb = false;
  double scale = 1.0;
};

// The choice for router logits [T, E] in one kernel: (weights [T, k] in the logits' dtype, ids
// [T, k] int64), as the ATen chain computes it (the renormalising sum may round differently in
// the last bit). Undefined tensors when the kernel does not take the logits.
std::pair<at::Tensor, at::Tensor> moeSelect(const at::Tensor& logits, const MoeRouting& routing);

// FusedMoE's experts for a few tokens with the routing kept on the GPU (no host sync, so CUDA
// graphs record it): x [T, H], topk weights [T, k] (x's dtype) and ids [T, k] (int64), this
// rank's experts from firstExpert on (w13 [E_local, 2I, H], w2 [E_local, H, I]) -> [T, H], the
// sum of each token's local experts. Undefined when the kernels do not take the shapes.
at::Tensor fusedMoe(const at::Tensor& x, const at::Tensor& weights, const at::Tensor& ids,
                    const at::Tensor& w13, const at::Tensor& w2, int64_t firstExpert);
// The same from the router logits [T, E] (x's dtype): the choice (moeSelect) runs inside the
// first of the three kernels.
at::Tensor fusedMoe(const at::Tensor& x, const at::Tensor& routerLogits, const MoeRouting& routing,
                    const at::Tensor& w13, const at::Tensor& w2, int64_t firstExpert);
// The same for a decode step of a few tokens nobody observes, from the router's weight [E, H] (x's
// dtype): the router's GEMV runs in the first kernel too, its logits rounded as gemv() rounds
// them. `routerDone` is an int32 zero on x's device that the kernel leaves zero (one per layer:
// FusedMoE holds it). Undefined when the kernels do not take the shapes.
at::Tensor fusedMoe(const at::Tensor& x, const at::Tensor& routerWeight,
                    const at::Tensor& routerDone, const MoeRouting& routing, const at::Tensor& w13,
                    const at::Tensor& w2, int64_t firstExpert);
// The RMSNorm a fused kernel folds in before its own work: norm(x + residual) with weight [H] and
// eps (residual undefined: norm(x)), rounded as addRmsNorm / rmsNorm.
struct NormIn {
  at::Tensor residual, weight;
  double eps = 1e-6;
};
// The overload above with the layer's post-attention RMSNorm folded into its first kernel: x is
// the hidden state before the norm. {y, x + residual} (x itself without a residual), y bit for bit
// addRmsNorm followed by the overload above; undefined when the kernels do not take the shapes,
// or when SHARDSCOPE_FUSED_MOE_NORM=0 (core/runtime_switches.h).
std::pair<at::Tensor, at::Tensor> fusedMoeAfterNorm(const at::Tensor& x, const NormIn& norm,
                                                    const at::Tensor& routerWeight,
                                                    const at::Tensor& routerDone,
                                                    const MoeRouting& routing,
                                                    const at::Tensor& w13, const at::Tensor& w2,
                                                    int64_t firstExpert);
// Whether fusedMoe takes every step of up to `tokens` tokens with these sizes.
bool fusedMoeTakes(int64_t tokens, int64_t topK, int64_t hidden, int64_t inter,
                   int64_t localExperts);

// A prefill's expert outputs combined per token (GroupedExperts): down [rows, H] holds the local
// (token, choice) pairs' rows, rowOf [T * k] int64 each pair's row in down (-1: another rank's
// expert), weights [T, k] (down's dtype) and ids [T, k] int64 the routing -> y [T, H], each token's
// weighted rows added in increasing expert order, each product and add rounded: one kernel for
// ATen's multiply, index_copy into zeros, gather and k - 1 adds, bit for bit. Undefined when the
// kernel does not take the tensors.
at::Tensor moeCombine(const at::Tensor& down, const at::Tensor& rowOf, const at::Tensor& weights,
                      const at::Tensor& ids);

}  // namespace shardscope::fused
