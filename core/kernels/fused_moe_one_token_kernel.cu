#include <cstdlib>
#include <cstring>

#include "expert_rows.cuh"
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
constexpr int kMaxChoices = kMoeSelectMaxTopK;

// The token's choice made once a block, into shared memory: each choice's expert (local index,
// -1 for another rank's), its weight as the general kernels read it (rounded to T) and, in
// byExpert, the choices in increasing expert order. Warp 0 copies the logits row with 16-byte
// loads and computes the probabilities (every warp of every block loading the row itself queued
// thousands of requests on one L2 slice: the first version of these kernels, gate_up and down each
// 3.5 us slower); then every thread ranks an expert against the others (its place in the order of
// the choice, chooseKey, lower expert first among equal keys), so the k rounds of a warp's
// arg-max (about 1.5 us of latency in the second version) become one pass in parallel: `chosen`
// is ready after it. With WEIGHTS (down) warp 0 then fills expert, weight (renormalised in order
// of choice, as writeWeights does) and byExpert, block 0 writes the choice for callers, and a
// barrier ends the call (gate_up, which needs only `chosen`, keeps its registers to its loads).
struct BlockChoice {
  int expert[kMaxChoices];
  float weight[kMaxChoices];
  int byExpert[kMaxChoices];
  int chosen[kMaxChoices];  // choice r's expert id
  float p[32 * kLaneExperts];
  unsigned key[32 * kLaneExperts];
};
template <typename T, bool WEIGHTS>
__device__ __forceinline__ void chooseInBlock(const FusedMoeArgs& a, BlockChoice& b) {
  constexpr int VEC = 16 / sizeof(T);
  const MoeSelectArgs& s = a.select;
  const int lane = threadIdx.x % 32, topK = int(a.topK), experts = int(s.experts);
  if (threadIdx.x < 32) {
    const T* row = static_cast<const T*>(s.logits);
    float p[kLaneExperts];
    if (experts % VEC == 0 && reinterpret_cast<uintptr_t>(row) % 16 == 0) {
      for (int c = lane; c * VEC < experts; c += 32) {
        const int4 raw = __ldcg(reinterpret_cast<const int4*>(row) + c);
        const Vec<T, VEC> v = *reinterpret_cast<const Vec<T, VEC>*>(&raw);
#pragma unroll
        for (int i = 0; i < VEC; ++i) b.p[c * VEC + i] = toFloat(v.v[i]);
      }
      __syncwarp();
#pragma unroll
      for (int i = 0; i < kLaneExperts; ++i) p[i] = b.p[min(lane + 32 * i, experts - 1)];
    } else {
#pragma unroll
      for (int i = 0; i < kLaneExperts; ++i)
        p[i] = toFloat(__ldcg(row + min(lane + 32 * i, experts - 1)));
    }
    softmaxInRegisters(experts, p);
    __syncwarp();  // every lane has read the logits before they are overwritten
#pragma unroll
    for (int i = 0; i < kLaneExperts; ++i) {
      const int e = lane + 32 * i;
      if (e < experts) {
        b.p[e] = p[i];
        b.key[e] = choiceKey(p[i]);
      }
    }
  }
  __syncthreads();
  // `split` adjacent threads (a power of two, at most a warp) rank one expert, each against every
  // split-th other; their counts meet in a butterfly.
  const int share = max(1, min(32, int(blockDim.x) / experts));
  const int split = 1 << (31 - __clz(share));
  const int e = min(int(threadIdx.x) / split, experts - 1), part = int(threadIdx.x) % split;
  const unsigned mine = b.key[e];
  int rank = 0;
  for (int f = part; f < experts; f += split) {
    const unsigned other = b.key[f];
    rank += other > mine || (other == mine && f < e);
  }
  for (int o = split / 2; o > 0; o >>= 1) rank += __shfl_xor_sync(kFull, rank, o);
  if (part == 0 && int(threadIdx.x) / split < experts && rank < topK) b.chosen[rank] = e;
  __syncthreads();
  if (!WEIGHTS) return;
  const bool first = blockIdx.x == 0 && blockIdx.y == 0;
  if (threadIdx.x < 32) {
    const int id = b.chosen[min(lane, topK - 1)];
    const int64_t local = int64_t(id) - a.firstExpert;
    float total = 0.f;  // the chosen p in order of choice
    for (int i = 0; i < topK; ++i) total = __fadd_rn(total, b.p[b.chosen[i]]);
    float w = s.normTopkProb ? __fdiv_rn(b.p[id], total) : b.p[id];
    if (s.scale != 1.f) w = __fmul_rn(w, s.scale);
    int below = 0;  // choices of a lower expert (the ids are distinct)
    for (int i = 0; i < topK; ++i) below += b.chosen[i] < id;
    if (lane < topK) {
      b.expert[lane] = local >= 0 && local < a.localExperts ? int(local) : -1;
      b.weight[lane] = toFloat(fromFloat<T>(w));
      b.byExpert[below] = lane;
      if (first) {
        s.ids[lane] = id;
        static_cast<T*>(s.weights)[lane] = fromFloat<T>(w);
      }
    }
  }
  if constexpr (WEIGHTS) __syncthreads();
}

// h[j, i] = round(round(silu(round(x . G_e[i]))) * round(x . U_e[i])) for choice j = blockIdx.x
// of expert e; warp w of block y computes intermediate rows (y * kWarps + w) * kRows + g.
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
// The choice and the first round of the warp's weights come before the wait on gate_up: neither
// depends on it (the logits are two kernels back, complete before gate_up let this one start).
template <typename T>
__global__ void __launch_bounds__(kWarps * 32, 2) downOneTokenKernel(FusedMoeArgs a) {
  constexpr int VEC = 16 / sizeof(T);
  constexpr int64_t kChunk = 32 * VEC;
  __shared__ float outs[kMaxChoices][kDownRows];
  __shared__ BlockChoice choice;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, topK = int(a.topK);
  const int64_t o0 = int64_t(blockIdx.x) * kDownRows;
  chooseInBlock<T, true>(a, choice);
  const auto weightRows = [&](int64_t e, const T*(&w)[kDownRows]) {
    const T* w2 = static_cast<const T*>(a.w2) + e * a.hidden * a.inter;
#pragma unroll
    for (int r = 0; r < kDownRows; ++r) w[r] = w2 + min(o0 + r, a.hidden - 1) * a.inter;
  };
  const int64_t k0 = int64_t(lane) * VEC;
  const int64_t firstE = warp < topK ? choice.expert[warp] : -1;
  const T* w[kDownRows];
  Vec<T, VEC> first[kDownRows];  // the first round of this warp's first choice
  if (firstE >= 0) {
    weightRows(firstE, w);
#pragma unroll
    for (int r = 0; r < kDownRows; ++r) {
      if (k0 < a.inter) first[r] = load<T, VEC>(w[r] + k0);
    }
  }
  waitForPreviousKernel();  // h
  allowNextKernel();
  for (int j = warp; j < topK; j += kWarps) {
    const int64_t e = choice.expert[j];
    const float wj = choice.weight[j];
    if (e < 0) continue;
    if (j != warp) weightRows(e, w);
    const T* hj = static_cast<const T*>(a.h) + j * a.inter;
    float acc[kDownRows] = {};
    for (int64_t k = k0; k < a.inter; k += kChunk) {
      Vec<T, VEC> wv[kDownRows];
#pragma unroll
      for (int r = 0; r < kDownRows; ++r)
        wv[r] = j == warp && k == k0 ? first[r] : load<T, VEC>(w[r] + k);
      const Vec<T, VEC> xv = load<T, VEC>(hj + k);
#pragma unroll
      for (int r = 0; r < kDownRows; ++r) {
#pragma unroll
        for (int i = 0; i < VEC; ++i)
          acc[r] = __fmaf_rn(toFloat(wv[r].v[i]), toFloat(xv.v[i]), acc[r]);
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
  const char* v = std::getenv("SHARDSCOPE_MOE_ONE_TOKEN");  // at each call: a process compares both
  return !(v && std::strcmp(v, "0") == 0) && a.tokens == 1 && a.select.logits && a.select.ids &&
         a.select.weights && a.select.experts >= a.topK && a.select.experts <= 32 * kLaneExperts &&
         a.topK <= kMaxChoices;
}

cudaError_t launchOneTokenExperts(const FusedMoeArgs& a, cudaStream_t stream) {
  if (!oneTokenExpertsTake(a)) return cudaErrorInvalidValue;
  return dispatch(a.dtype, [&](auto t) -> cudaError_t {
    using T = decltype(t);
    constexpr int64_t kGateRange = int64_t(kWarps) * GateUp::kRows;
    const dim3 threads(kWarps * 32);
    const cudaError_t e =
        launchKernel(gateUpOneTokenKernel<T>,
                     dim3(unsigned(a.topK), unsigned((a.inter + kGateRange - 1) / kGateRange)),
                     threads, 0, stream, a);
    if (e != cudaSuccess) return e;
    return launchKernel(downOneTokenKernel<T>,
                        dim3(unsigned((a.hidden + kDownRows - 1) / kDownRows)), threads, 0, stream,
                        a);
  });
}

}  // namespace shardscope::kernels
