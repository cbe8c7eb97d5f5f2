// One warp's choice of a token's experts from its router logits (moeSelect's arithmetic), shared
// by the choice-only kernel (moe_select_kernel.cu) and the fused MoE kernels' routing.
#pragma once

#include <climits>
#include <cmath>

#include "kernel_math.cuh"

namespace shardscope::kernels {

constexpr unsigned kFull = 0xffffffffu;  // every lane of a warp

// Whether (p, e) comes before (q, f) in the order of the choice: larger p first, then lower e.
__device__ __forceinline__ bool before(float p, int e, float q, int f) {
  return p > q || (p == q && e < f);
}

// A butterfly over the warp: every lane ends with the first of the lanes' (bestP, bestE) in the
// order above.
__device__ __forceinline__ void warpFirst(float& bestP, int& bestE) {
  for (int o = 16; o > 0; o >>= 1) {
    const float p = __shfl_xor_sync(kFull, bestP, o);
    const int e = __shfl_xor_sync(kFull, bestE, o);
    if (before(p, e, bestP, bestE)) {
      bestP = p;
      bestE = e;
    }
  }
}

// Round r of token t's choice, after each lane's candidate (bestP, bestE): the warp's first is
// choice r; lane r keeps its p in `mine`, lane 0 writes its id, and it bounds the next round.
__device__ __forceinline__ void settleRound(const MoeSelectArgs& s, int64_t t, int topK, int r,
                                            float bestP, int bestE, float& mine, float& lastP,
                                            int& lastE) {
  warpFirst(bestP, bestE);
  const int lane = threadIdx.x % 32;
  if (lane == r) mine = bestP;
  if (lane == 0) s.ids[t * topK + r] = bestE;
  lastP = bestP;
  lastE = bestE;
}

// The weights of token t's choice, lane j holding choice j's p in `mine` (the others any value).
template <typename T>
__device__ __forceinline__ void writeWeights(const MoeSelectArgs& s, int64_t t, int topK,
                                             float mine) {
  const int lane = threadIdx.x % 32;
  float total = 0.f;  // the chosen p in order of choice
  for (int r = 0; r < topK; ++r) total = __fadd_rn(total, __shfl_sync(kFull, mine, r));
  if (lane >= topK) return;
  float w = s.normTopkProb ? __fdiv_rn(mine, total) : mine;
  if (s.scale != 1.f) w = __fmul_rn(w, s.scale);
  static_cast<T*>(s.weights)[t * topK + lane] = fromFloat<T>(w);
}

// Token t's experts (MoeSelectArgs), by one warp. The softmax's max and sum run as ATen's warp
// softmax runs them (lane l takes experts l, l + 32, ..., then a butterfly over the lanes), so p
// is the value at::softmax gives; the top k are found by k rounds of a warp arg-max, each after
// the previous choice in the order above; lane j keeps choice j's p for the renormalisation.
// This is the path for more than 32 * kLaneExperts experts: p is recomputed every round.
template <typename T>
__device__ void selectTokenStreamed(const MoeSelectArgs& s, int64_t t, int topK) {
  const int lane = threadIdx.x % 32;
  const T* row = static_cast<const T*>(s.logits) + t * s.experts;
  float m = -INFINITY;
  // Through L2: with the router's GEMV in the same kernel, other blocks wrote the row.
  const auto logit = [&](int64_t e) { return toFloat(__ldcg(row + e)); };
  for (int64_t e = lane; e < s.experts; e += 32) m = fmaxf(m, logit(e));
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(kFull, m, o));
  float sum = 0.f;
  for (int64_t e = lane; e < s.experts; e += 32) sum = __fadd_rn(sum, expf(__fsub_rn(logit(e), m)));
  for (int o = 16; o > 0; o >>= 1) sum = __fadd_rn(sum, __shfl_xor_sync(kFull, sum, o));
  float lastP = INFINITY, mine = 0.f;
  int lastE = -1;
  for (int r = 0; r < topK; ++r) {
    float bestP = -1.f;  // below every probability
    int bestE = INT_MAX;
    for (int64_t e = lane; e < s.experts; e += 32) {
      const float p = __fdiv_rn(expf(__fsub_rn(logit(e), m)), sum);
      if (before(lastP, lastE, p, int(e)) && before(p, int(e), bestP, bestE)) {
        bestP = p;
        bestE = int(e);
      }
    }
    settleRound(s, t, topK, r, bestP, bestE, mine, lastP, lastE);
  }
  writeWeights<T>(s, t, topK, mine);
}

// The largest / smallest of the lanes' values, every lane gets it: one redux instruction on
// sm_80 and later, a butterfly before.
__device__ __forceinline__ unsigned warpMax(unsigned v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  return __reduce_max_sync(kFull, v);
#else
  for (int o = 16; o > 0; o >>= 1) v = max(v, __shfl_xor_sync(kFull, v, o));
  return v;
#endif
}
__device__ __forceinline__ unsigned warpMin(unsigned v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  return __reduce_min_sync(kFull, v);
#else
  for (int o = 16; o > 0; o >>= 1) v = min(v, __shfl_xor_sync(kFull, v, o));
  return v;
#endif
}

// A token's choice as the warp holds it: lane j < topK has choice j's expert and probability
// (its softmax value, before the renormalisation), and every lane the weights' denominator.
struct WarpChoice {
  int expert = 0;
  float p = 0.f, total = 0.f;
};

// p[i] holds expert lane + 32 i's logit (any value past the last expert) on the way in; the
// loads are the caller's (chooseInRegisters, or a block's shared copy of the row).
constexpr int kLaneExperts = 8;

// Where a probability ranks in the choice (the order of `before`, larger first): p >= 0, so its
// bits order as unsigned ints; 0 is below every expert (taken, or past the last). A NaN p ranks
// below every number (as `before` never prefers it), so ids stay in range.
__device__ __forceinline__ unsigned choiceKey(float p) {
  return isnan(p) ? 1u : __float_as_uint(p) + 2u;
}

// The logits in p become the probabilities at::softmax gives, by the same expressions in the same
// order as selectTokenStreamed: lane l takes experts l, l + 32, ..., then a butterfly.
__device__ __forceinline__ void softmaxInRegisters(int64_t experts, float (&p)[kLaneExperts]) {
  const int lane = threadIdx.x % 32;
  float m = -INFINITY;
#pragma unroll
  for (int i = 0; i < kLaneExperts; ++i) {
    if (lane + 32 * i < experts) m = fmaxf(m, p[i]);
  }
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(kFull, m, o));
  float sum = 0.f;
#pragma unroll
  for (int i = 0; i < kLaneExperts; ++i) {
    p[i] = expf(__fsub_rn(p[i], m));
    if (lane + 32 * i < experts) sum = __fadd_rn(sum, p[i]);
  }
  for (int o = 16; o > 0; o >>= 1) sum = __fadd_rn(sum, __shfl_xor_sync(kFull, sum, o));
#pragma unroll
  for (int i = 0; i < kLaneExperts; ++i) p[i] = __fdiv_rn(p[i], sum);
}

// The choice with the lane's experts (at most kLaneExperts) in registers: each p is computed once,
// so the choice and the weights are bit for bit the streamed path's. A round takes the largest key
// left, the lowest expert among equal ones: two redux instructions where the butterfly of
// warpFirst took ten shuffles (the k rounds are on the router's critical path).
__device__ __forceinline__ WarpChoice chooseFrom(const MoeSelectArgs& s, float (&p)[kLaneExperts],
                                                 int topK) {
  const int lane = threadIdx.x % 32;
  softmaxInRegisters(s.experts, p);
  unsigned key[kLaneExperts];  // 0 once taken
#pragma unroll
  for (int i = 0; i < kLaneExperts; ++i) key[i] = lane + 32 * i < s.experts ? choiceKey(p[i]) : 0u;
  WarpChoice c;
  for (int r = 0; r < topK; ++r) {
    unsigned best = 0, bestE = UINT_MAX;  // the lane's first free expert in the order
#pragma unroll
    for (int i = 0; i < kLaneExperts; ++i) {
      if (key[i] > best) {  // strictly: among equal p the lower expert (lower i) stays
        best = key[i];
        bestE = unsigned(lane + 32 * i);
      }
    }
    const unsigned top = warpMax(best);
    const int chosen = int(warpMin(best == top ? bestE : UINT_MAX));
#pragma unroll
    for (int i = 0; i < kLaneExperts; ++i) {
      if (lane + 32 * i == chosen) key[i] = 0;
    }
    if (lane == r) {
      c.expert = chosen;
      c.p = top == 1u ? __int_as_float(0x7fc00000) : __uint_as_float(top - 2u);
    }
  }
  for (int r = 0; r < topK; ++r) c.total = __fadd_rn(c.total, __shfl_sync(kFull, c.p, r));
  return c;
}

// Token t's choice (chooseFrom), its logits loaded from global memory, all in flight together.
template <typename T>
__device__ __forceinline__ WarpChoice chooseInRegisters(const MoeSelectArgs& s, int64_t t,
                                                        int topK) {
  const int lane = threadIdx.x % 32;
  const T* row = static_cast<const T*>(s.logits) + t * s.experts;
  float p[kLaneExperts];
#pragma unroll
  for (int i = 0; i < kLaneExperts; ++i) {  // no branch: the loads are in flight together
    const int64_t e = min(int64_t(lane + 32 * i), s.experts - 1);  // past the end: not counted
    p[i] = toFloat(__ldcg(row + e));  // through L2: another block or kernel wrote the row
  }
  return chooseFrom(s, p, topK);
}

// Choice j's weight (lane j's), from the warp's choice: renormalised and scaled as writeWeights.
__device__ __forceinline__ float choiceWeight(const MoeSelectArgs& s, const WarpChoice& c) {
  float w = s.normTopkProb ? __fdiv_rn(c.p, c.total) : c.p;
  return s.scale != 1.f ? __fmul_rn(w, s.scale) : w;
}

template <typename T>
__device__ void selectTokenInRegisters(const MoeSelectArgs& s, int64_t t, int topK) {
  const WarpChoice c = chooseInRegisters<T>(s, t, topK);
  const int lane = threadIdx.x % 32;
  if (lane >= topK) return;
  s.ids[t * topK + lane] = c.expert;
  static_cast<T*>(s.weights)[t * topK + lane] = fromFloat<T>(choiceWeight(s, c));
}

template <typename T>
__device__ void selectToken(const MoeSelectArgs& s, int64_t t, int topK) {
  if (s.experts <= 32 * kLaneExperts)
    selectTokenInRegisters<T>(s, t, topK);
  else
    selectTokenStreamed<T>(s, t, topK);
}

}  // namespace shardscope::kernels
