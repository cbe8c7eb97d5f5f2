// The token's choice of experts made by every block of the one-token expert kernels, from the
// router logits, in shared memory.
#pragma once

#include "expert_rows.cuh"

namespace shardscope::kernels {

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
struct alignas(16) BlockChoice {
  int expert[kMaxChoices];
  float weight[kMaxChoices];
  int byExpert[kMaxChoices];
  int chosen[kMaxChoices];  // choice r's expert id
  float p[32 * kLaneExperts];
  unsigned key[32 * kLaneExperts];  // 0 past the last expert: read four at a time
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
      if (e < experts) b.p[e] = p[i];
      b.key[e] = e < experts ? choiceKey(p[i]) : 0u;
    }
  }
  __syncthreads();
  // `split` adjacent threads (a power of two, at most a warp) rank one expert, each against every
  // split-th group of four others (one 16-byte load); their counts meet in a butterfly. Expert f
  // is before e when its key is larger, or equal and f < e: larger than mine - 1 below e (keys of
  // experts are at least 1), larger than mine from e on (e itself is not). Keys past the last
  // expert are 0 and never count. Against a key a load (two compares and an and each): a 30B step
  // 2.83-2.84 ms against 2.84 on an H100, bench/phase_sync_bench's choice 19.82 us against 20.07.
  const int share = max(1, min(32, int(blockDim.x) / experts));
  const int split = 1 << (31 - __clz(share));
  const int e = min(int(threadIdx.x) / split, experts - 1), part = int(threadIdx.x) % split;
  const unsigned mine = b.key[e];
  const uint4* keys = reinterpret_cast<const uint4*>(b.key);
  int rank = 0;
#pragma unroll 4
  for (int g = part; 4 * g < experts; g += split) {
    const uint4 other = keys[g];
    const int f = 4 * g;
    rank += other.x > mine - unsigned(f < e);
    rank += other.y > mine - unsigned(f + 1 < e);
    rank += other.z > mine - unsigned(f + 2 < e);
    rank += other.w > mine - unsigned(f + 3 < e);
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

}  // namespace shardscope::kernels
