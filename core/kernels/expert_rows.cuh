// What the fused MoE kernels share: a warp's dot products of streamed expert weight rows with a
// few token rows (dotRows), and how each kernel variant splits its rows over warps (WarpRows).
#pragma once

#include "kernel_math.cuh"
#include "moe_select.cuh"

namespace shardscope::kernels {

constexpr int kWarps = 8;      // warps of one block of every kernel but the routing-only one
constexpr int kTokenRows = 4;  // tokens dotted with one streamed weight row at a time

// acc[r][m] += w[r][0..len) . rows[m][0..len) for the W weight rows and the `n` (<= TR)
// token rows, one warp, fp32; each lane adds its elements in increasing order, then the lanes
// add in a butterfly. kAhead 16-byte loads of each weight row are issued before the multiplies
// use them (one after another, each load waited for in turn, a warp's rows took as many memory
// latencies as loads). Neither W, kAhead nor TR changes the order of any (row, token)'s adds.
template <typename T, int W, int kAhead, int TR>
__device__ __forceinline__ void dotRows(const T* const (&w)[W], const T* const (&rows)[TR], int n,
                                        int64_t len, float (&acc)[W][TR]) {
  constexpr int VEC = 16 / sizeof(T);
  constexpr int64_t kChunk = 32 * VEC;
  for (int64_t k0 = int64_t(threadIdx.x % 32) * VEC; k0 < len; k0 += kAhead * kChunk) {
    int4 wv[W][kAhead];  // words, not Vecs: see loadWords
#pragma unroll
    for (int r = 0; r < W; ++r) {
#pragma unroll
      for (int u = 0; u < kAhead; ++u) {
        if (k0 + u * kChunk < len) wv[r][u] = loadWords(w[r] + k0 + u * kChunk);
      }
    }
#pragma unroll
    for (int u = 0; u < kAhead; ++u) {
      const int64_t k = k0 + u * kChunk;
      if (k >= len) break;
#pragma unroll
      for (int m = 0; m < TR; ++m) {
        if (m >= n) break;
        const Vec<T, VEC> xv = load<T, VEC>(rows[m] + k);
#pragma unroll
        for (int r = 0; r < W; ++r) {
          const Vec<T, VEC> wr = asVec<T, VEC>(wv[r][u]);
#pragma unroll
          for (int j = 0; j < VEC; ++j)
            acc[r][m] = __fmaf_rn(toFloat(wr.v[j]), toFloat(xv.v[j]), acc[r][m]);
        }
      }
    }
  }
#pragma unroll
  for (int r = 0; r < W; ++r) {
#pragma unroll
    for (int m = 0; m < TR; ++m) {
      for (int o = 16; o > 0; o >>= 1) acc[r][m] += __shfl_xor_sync(kFull, acc[r][m], o);
    }
  }
}

// The gate row then the up row of intermediate rows i0 .. i0 + R of one expert, whose gate_up
// weights [2 * inter, hidden] start at w13 (a row past inter is the last row; not written).
template <typename T, int R>
__device__ __forceinline__ void gateUpRowPointers(const T* w13, int64_t i0, int64_t inter,
                                                  int64_t hidden, const T* (&rows)[2 * R]) {
#pragma unroll
  for (int g = 0; g < R; ++g) {
    const int64_t i = min(i0 + g, inter - 1);
    rows[2 * g] = w13 + i * hidden;
    rows[2 * g + 1] = w13 + (inter + i) * hidden;
  }
}

// How the expert kernels split the work: each warp computes kRows output rows (gate_up:
// intermediate rows, two weight rows each) for kTokens tokens at a time, with kAhead 16-byte
// loads of every weight row in flight (dotRows); __launch_bounds__ asks for kMinBlocks blocks an
// SM. No choice here changes the order of any sum's adds.
template <int Rows, int Ahead, int Tokens, int MinBlocks>
struct WarpRows {
  static constexpr int kRows = Rows, kAhead = Ahead, kTokens = Tokens, kMinBlocks = MinBlocks;
};
// One row a warp, each weight row streamed once for up to kTokenRows tokens: for batches and
// prefill (their grids have many waves anyway).
using NarrowGateUp = WarpRows<1, 4, kTokenRows, 2>;
using NarrowDown = WarpRows<1, 4, kTokenRows, 3>;
// One token (a decode step at batch 1): one row a warp left the warps latency-bound (down: 3
// loads a lane for inter 768, then a wait, over about five waves of small blocks). Several rows a
// warp make the Qwen3-30B-A3B step's grids one wave on 132 SMs at 2 blocks an SM (8 experts;
// gate_up 3 intermediate rows a warp: 8 x 32 blocks, 12 loads a lane in flight (18 were no
// faster, bench/RESULTS.md runs 14-16); down 8 rows a warp: 8 x 32 blocks, 8 loads a lane in
// flight); one token a chunk leaves the registers to those loads.
using WideGateUp = WarpRows<3, 2, 1, 2>;
using WideDown = WarpRows<8, 1, 1, 2>;

// One warp's row of the router's logits: expert e's weight row dotted with up to TR token rows,
// each lane adding its elements in increasing order, then the lanes in a butterfly (fused::gemv's
// order, so the logits are its bits). The first kRound 16-byte loads a lane are issued when made,
// before the kernel waits on the one before (the weights do not depend on it); a warp past the
// experts (not `mine`) loads nothing and sums to zero.
template <typename T, int TR>
struct RouterRowDot {
  static constexpr int VEC = 16 / sizeof(T), kRound = 8;
  static constexpr int64_t kChunk = 32 * VEC;
  const FusedMoeArgs& a;
  const bool mine;
  const T* w;
  int64_t k0;
  Vec<T, VEC> wv[kRound];

  __device__ __forceinline__ RouterRowDot(const FusedMoeArgs& args, int64_t e)
      : a(args),
        mine(e < args.select.experts),
        w(static_cast<const T*>(args.routerWeight) + (mine ? e : 0) * args.hidden),
        k0(int64_t(threadIdx.x % 32) * VEC) {
    if (mine) loadRound();
  }
  __device__ __forceinline__ void loadRound() {
#pragma unroll
    for (int u = 0; u < kRound; ++u) {
      if (k0 + u * kChunk < a.hidden) wv[u] = load<T, VEC>(w + k0 + u * kChunk);
    }
  }
  // acc[m] = the row . x[m * hidden ..) for the `tokens` (<= TR) rows of x, whole in every lane.
  __device__ __forceinline__ void dot(const T* x, int64_t tokens, float (&acc)[TR]) {
#pragma unroll
    for (int m = 0; m < TR; ++m) acc[m] = 0.f;
    while (mine && k0 < a.hidden) {
#pragma unroll
      for (int u = 0; u < kRound; ++u) {
        const int64_t k = k0 + u * kChunk;
        if (k >= a.hidden) break;
#pragma unroll
        for (int m = 0; m < TR; ++m) {
          if (m >= tokens) break;
          const Vec<T, VEC> xv = load<T, VEC>(x + m * a.hidden + k);
#pragma unroll
          for (int j = 0; j < VEC; ++j)
            acc[m] = __fmaf_rn(toFloat(wv[u].v[j]), toFloat(xv.v[j]), acc[m]);
        }
      }
      k0 += kRound * kChunk;
      if (k0 < a.hidden) loadRound();
    }
#pragma unroll
    for (int m = 0; m < TR; ++m) {
      for (int o = 16; o > 0; o >>= 1) acc[m] += __shfl_xor_sync(kFull, acc[m], o);
    }
  }
};

}  // namespace shardscope::kernels
