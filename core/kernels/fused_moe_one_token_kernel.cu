
#include "block_choice.cuh"
#include "core/runtime_switches.h"
#include "fused_moe_one_token.cuh"

// Why: at batch 1 the three-kernel path spent its time in latency, not bytes. The router kernel's
// last block chose, built lists through global memory and zeroed counts; gate_up and down read
// the lists back (dependent loads before the first weight load); down's last block of each row
// range combined the experts after a fence and an atomic. Here each block chooses from the
// 128-odd logits itself (one warp, two redux instructions a round), down loads its first weights
// before waiting on gate_up, and one block adds its rows' experts from shared memory. Every sum
// is added in the order of the general kernels (dotRows, combineRows), so the bits are the same.

namespace shardscope::kernels {
namespace {

using GateUp = WideGateUp;    // 3 intermediate rows a warp: 8 x 32 blocks for Qwen3-30B-A3B
constexpr int kDownRows = 8;  // output rows a block (one wave of 256 blocks at hidden 2048)

// h[j, i] = round(round(silu(round(x . G_e[i]))) * round(x . U_e[i])) for choice j = blockIdx.x
// of expert e; warp w of block y computes intermediate rows (y * kWarps + w) * kRows + g, with
// GateUp::kAhead loads of each of its 2 kRows weight rows in flight.
template <typename T>
__global__ void __launch_bounds__(kWarps * 32, GateUp::kMinBlocks)
    gateUpOneTokenKernel(FusedMoeArgs a) {
  constexpr int R = GateUp::kRows;
  __shared__ BlockChoice choice;
  waitForPreviousKernel();  // the logits
  allowNextKernel();
  chooseInBlock<T, false>(a, choice);
  const int lane = threadIdx.x % 32, j = int(blockIdx.x);
  const int64_t expert = int64_t(choice.chosen[j]) - a.firstExpert;
  const int64_t i0 = (int64_t(blockIdx.y) * kWarps + threadIdx.x / 32) * R;
  if (expert < 0 || expert >= a.localExperts || i0 >= a.inter) return;  // another rank's expert
  const T* gateUp[2 * R];
  gateUpRowPointers<T, R>(static_cast<const T*>(a.w13) + expert * 2 * a.inter * a.hidden, i0,
                          a.inter, a.hidden, gateUp);
  const T* rows[1] = {static_cast<const T*>(a.x)};
  float acc[2 * R][1] = {};
  dotRows<T, 2 * R, GateUp::kAhead, 1>(gateUp, rows, 1, a.hidden, acc);
  if (lane != 0) return;
#pragma unroll
  for (int g = 0; g < R; ++g) {
    const int64_t i = i0 + g;
    if (i >= a.inter) break;
    static_cast<T*>(a.h)[j * a.inter + i] = swiGlu<T>(acc[2 * g][0], acc[2 * g + 1][0]);
  }
}

// y[o] for the kDownRows rows o of block b: warp w computes choice j = w (then w + kWarps, ...)
// on those rows, round(round(h_j . D_e[o]) * weight_j), into shared memory; then each row adds
// the local choices in increasing expert order from zero, each add rounded (combineRows' order).
// A lane loads kHeld 16-byte chunks of each of the 8 rows at a time (a pass), held as words from
// one row pointer a warp: 90 registers in bf16 where a pointer and a Vec a row took 111 (a 30B
// step 2.92-2.96 ms on H100s, 2.98-2.99 before). Three chunks a pass (128 registers), or 64
// registers so that a block fits on an SM beside gate_up's two, were slower (RESULTS run 18).
// The choice and the warp's first pass come before the wait on gate_up: neither depends on it
// (the logits are two kernels back, complete before gate_up let this one start).
template <typename T>
__global__ void __launch_bounds__(kWarps * 32, 2) downOneTokenKernel(FusedMoeArgs a) {
  // One chunk a pass, written as passes because this is the code measured: the same loop written
  // a chunk at a time compiles to 94 registers (ptxas), not run on a GPU.
  constexpr int kHeld = 1;
  constexpr int VEC = 16 / sizeof(T);
  constexpr int64_t kChunk = 32 * VEC, kPass = kHeld * kChunk;
  __shared__ float outs[kMaxChoices][kDownRows];
  __shared__ BlockChoice choice;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, topK = int(a.topK);
  const int64_t o0 = int64_t(blockIdx.x) * kDownRows;
  chooseInBlock<T, true>(a, choice);
  // Row r of the block in expert e's down weights starts r * inter past rowsOf(e) (a row past
  // hidden reads the last row; not written).
  const int lastRow = int(min(int64_t(kDownRows), a.hidden - o0)) - 1;
  const auto rowsOf = [&](int64_t e) {
    return static_cast<const T*>(a.w2) + (e * a.hidden + o0) * a.inter;
  };
  const int64_t k0 = int64_t(lane) * VEC;
  const int64_t firstE = warp < topK ? choice.expert[warp] : -1;
  const T* w = nullptr;
  int4 held[kDownRows][kHeld];  // words, not Vecs: see loadWords
  const auto loadPass = [&](int64_t k) {
#pragma unroll
    for (int r = 0; r < kDownRows; ++r) {
      const T* row = w + int64_t(min(r, lastRow)) * a.inter;
#pragma unroll
      for (int u = 0; u < kHeld; ++u) {
        if (k + u * kChunk < a.inter) held[r][u] = loadWords(row + k + u * kChunk);
      }
    }
  };
  if (firstE >= 0) {
    w = rowsOf(firstE);
    loadPass(k0);
  }
  waitForPreviousKernel();  // h
  allowNextKernel();
  for (int j = warp; j < topK; j += kWarps) {
    const int64_t e = choice.expert[j];
    const float wj = choice.weight[j];
    if (e < 0) continue;
    if (j != warp) w = rowsOf(e);
    const T* hj = static_cast<const T*>(a.h) + j * a.inter;
    float acc[kDownRows] = {};
    for (int64_t k = k0; k < a.inter; k += kPass) {
      if (j != warp || k != k0) loadPass(k);
#pragma unroll
      for (int u = 0; u < kHeld; ++u) {
        const int64_t at = k + u * kChunk;
        if (at >= a.inter) break;
        const Vec<T, VEC> xv = load<T, VEC>(hj + at);
#pragma unroll
        for (int r = 0; r < kDownRows; ++r) {
          const Vec<T, VEC> wr = asVec<T, VEC>(held[r][u]);
#pragma unroll
          for (int i = 0; i < VEC; ++i)
            acc[r] = __fmaf_rn(toFloat(wr.v[i]), toFloat(xv.v[i]), acc[r]);
        }
      }
    }
#pragma unroll
    for (int r = 0; r < kDownRows; ++r) {
      for (int o = 16; o > 0; o >>= 1) acc[r] += __shfl_xor_sync(kFull, acc[r], o);
    }
    if (lane == 0) {
#pragma unroll
      for (int r = 0; r < kDownRows; ++r)
        outs[j][r] = toFloat(fromFloat<T>(__fmul_rn(toFloat(fromFloat<T>(acc[r])), wj)));
    }
  }
  __syncthreads();
  const int r = threadIdx.x;
  if (r >= kDownRows || o0 + r >= a.hidden) return;
  float y = 0.f;
  for (int n = 0; n < topK; ++n) {
    const int j = choice.byExpert[n];
    if (choice.expert[j] >= 0) y = addRounded<T>(y, outs[j][r]);
  }
  static_cast<T*>(a.y)[o0 + r] = fromFloat<T>(y);
}

}  // namespace
}  // namespace shardscope::kernels

namespace shardscope::kernels {

bool oneTokenExpertsTake(const FusedMoeArgs& a) {
  return RuntimeSwitches::current().moeOneToken && a.tokens == 1 && a.select.logits &&
         a.select.ids && a.select.weights && a.select.experts >= a.topK &&
         a.select.experts <= 32 * kLaneExperts && a.topK <= kMaxChoices;
}

cudaError_t launchOneTokenExperts(const FusedMoeArgs& a, cudaStream_t stream) {
  if (!oneTokenExpertsTake(a)) return cudaErrorInvalidValue;
  return dispatch(a.dtype, [&](auto t) -> cudaError_t {
    using T = decltype(t);
    constexpr int64_t kGateRange = int64_t(kWarps) * GateUp::kRows;
    const dim3 threads(kWarps * 32);
    const cudaError_t gateUp =
        launchKernel(gateUpOneTokenKernel<T>,
                     dim3(unsigned(a.topK), unsigned((a.inter + kGateRange - 1) / kGateRange)),
                     threads, 0, stream, a);
    if (gateUp != cudaSuccess) return gateUp;
    return launchKernel(downOneTokenKernel<T>,
                        dim3(unsigned((a.hidden + kDownRows - 1) / kDownRows)), threads, 0, stream,
                        a);
  });
}

}  // namespace shardscope::kernels
