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

using GateUp = WideGateUp;  // 3 intermediate rows a warp: 8 x 32 blocks for Qwen3-30B-A3B
// gate_up's ranges inside expertsOneTokenKernel: as many as the grid has blocks (a second wave of
// ranges left most blocks waiting: two rows a warp made the kernel 5 us slower than the two it
// replaces); with two loads ahead of each row, three rows spill in bf16 at 128 registers.
using OneKernelGateUp = WarpRows<3, 1, 1, 2>;
using OneKernelGateUpAhead = WarpRows<3, 2, 1, 2>;
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

// h[j, i] = round(round(silu(round(x . G_e[i]))) * round(x . U_e[i])) for choice j of expert e, on
// range `range` of the intermediate rows: warp w computes rows (range * kWarps + w) * kRows + g.
template <typename T, typename G>
__device__ __forceinline__ void gateUpRange(const FusedMoeArgs& a, const BlockChoice& choice, int j,
                                            int64_t range) {
  constexpr int R = G::kRows;
  const int lane = threadIdx.x % 32;
  const int64_t expert = int64_t(choice.chosen[j]) - a.firstExpert;
  const int64_t i0 = (range * kWarps + threadIdx.x / 32) * R;
  if (expert < 0 || expert >= a.localExperts || i0 >= a.inter) return;  // another rank's expert
  const T* gateUp[2 * R];
  gateUpRowPointers<T, R>(static_cast<const T*>(a.w13) + expert * 2 * a.inter * a.hidden, i0,
                          a.inter, a.hidden, gateUp);
  const T* rows[1] = {static_cast<const T*>(a.x)};
  float acc[2 * R][1] = {};
  dotRows<T, 2 * R, G::kAhead, 1>(gateUp, rows, 1, a.hidden, acc);
  if (lane != 0) return;
#pragma unroll
  for (int g = 0; g < R; ++g) {
    const int64_t i = i0 + g;
    if (i >= a.inter) break;
    static_cast<T*>(a.h)[j * a.inter + i] = swiGlu<T>(acc[2 * g][0], acc[2 * g + 1][0]);
  }
}

// The choice j = blockIdx.x, intermediate range blockIdx.y (gateUpRange).
template <typename T>
__global__ void __launch_bounds__(kWarps * 32, GateUp::kMinBlocks)
    gateUpOneTokenKernel(FusedMoeArgs a) {
  __shared__ BlockChoice choice;
  waitForPreviousKernel();  // the logits
  allowNextKernel();
  chooseInBlock<T, false>(a, choice);
  gateUpRange<T, GateUp>(a, choice, int(blockIdx.x), blockIdx.y);
}

// One warp's kDownRows rows of down for one expert: where they start, and the first round of
// their weights (loaded before the warp waits for h: they do not depend on it).
template <typename T>
struct DownRows {
  static constexpr int VEC = 16 / sizeof(T);
  const T* w[kDownRows];
  Vec<T, VEC> first[kDownRows];
};
template <typename T>
__device__ __forceinline__ void loadDownRows(const FusedMoeArgs& a, int64_t expert, int64_t o0,
                                             DownRows<T>& d) {
  const T* w2 = static_cast<const T*>(a.w2) + expert * a.hidden * a.inter;
#pragma unroll
  for (int r = 0; r < kDownRows; ++r) d.w[r] = w2 + min(o0 + r, a.hidden - 1) * a.inter;
  const int64_t k0 = int64_t(threadIdx.x % 32) * DownRows<T>::VEC;
  if (k0 >= a.inter) return;
#pragma unroll
  for (int r = 0; r < kDownRows; ++r) d.first[r] = load<T, DownRows<T>::VEC>(d.w[r] + k0);
}

// outs[j][r] = round(round(h_j . D_e[o0 + r]) * weight_j) for the warp's rows (loadDownRows). h
// written by other blocks of the same kernel is read through L2 (HL2), past the SM's L1.
template <typename T, bool HL2>
__device__ __forceinline__ void downChoice(const FusedMoeArgs& a, const DownRows<T>& d, int j,
                                           float wj, float (*outs)[kDownRows]) {
  constexpr int VEC = DownRows<T>::VEC;
  constexpr int64_t kChunk = 32 * VEC;
  const int lane = threadIdx.x % 32;
  const int64_t k0 = int64_t(lane) * VEC;
  const T* hj = static_cast<const T*>(a.h) + j * a.inter;
  float acc[kDownRows] = {};
  const auto add = [&](const Vec<T, VEC>(&wv)[kDownRows], int64_t k) {
    Vec<T, VEC> xv;
    if constexpr (HL2) {
      const int4 raw = __ldcg(reinterpret_cast<const int4*>(hj + k));
      xv = *reinterpret_cast<const Vec<T, VEC>*>(&raw);
    } else {
      xv = load<T, VEC>(hj + k);
    }
#pragma unroll
    for (int r = 0; r < kDownRows; ++r) {
#pragma unroll
      for (int i = 0; i < VEC; ++i)
        acc[r] = __fmaf_rn(toFloat(wv[r].v[i]), toFloat(xv.v[i]), acc[r]);
    }
  };
  for (int64_t k = k0; k < a.inter; k += kChunk) {
    Vec<T, VEC> wv[kDownRows];
#pragma unroll
    for (int r = 0; r < kDownRows; ++r) wv[r] = k == k0 ? d.first[r] : load<T, VEC>(d.w[r] + k);
    add(wv, k);
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

// y[o0 + r] = the local choices' outs[.][r] added in increasing expert order from zero, each add
// rounded (combineRows' order). After a barrier over outs.
template <typename T>
__device__ __forceinline__ void combineDownRows(const FusedMoeArgs& a, const BlockChoice& choice,
                                                const float (*outs)[kDownRows], int64_t o0) {
  const int r = threadIdx.x;
  if (r >= kDownRows || o0 + r >= a.hidden) return;
  float y = 0.f;
  for (int n = 0; n < int(a.topK); ++n) {
    const int j = choice.byExpert[n];
    if (choice.expert[j] >= 0) y = addRounded<T>(y, outs[j][r]);
  }
  static_cast<T*>(a.y)[o0 + r] = fromFloat<T>(y);
}

// y[o] for the kDownRows rows o of block b: warp w computes choice j = w (then w + kWarps, ...)
// on those rows (downChoice), then combineDownRows. The choice and the first round of the warp's
// weights come before the wait on gate_up: neither depends on it (the logits are two kernels
// back, complete before gate_up let this one start).
template <typename T>
__global__ void __launch_bounds__(kWarps * 32, 2) downOneTokenKernel(FusedMoeArgs a) {
  __shared__ float outs[kMaxChoices][kDownRows];
  __shared__ BlockChoice choice;
  const int warp = threadIdx.x / 32, topK = int(a.topK);
  const int64_t o0 = int64_t(blockIdx.x) * kDownRows;
  chooseInBlock<T, true>(a, choice);
  DownRows<T> d;
  const int64_t firstE = warp < topK ? choice.expert[warp] : -1;
  if (firstE >= 0) loadDownRows<T>(a, firstE, o0, d);
  waitForPreviousKernel();  // h
  allowNextKernel();
  for (int j = warp; j < topK; j += kWarps) {
    const int64_t e = choice.expert[j];
    if (e < 0) continue;
    if (j != warp) loadDownRows<T>(a, e, o0, d);
    downChoice<T, false>(a, d, j, choice.weight[j], outs);
  }
  __syncthreads();
  combineDownRows<T>(a, choice, outs, o0);
}

// Where each count lives in FusedMoeArgs::expertCounters: the tickets and the finished blocks in
// one 128-byte line, the finished gate_up ranges in the next (blocks poll it; the first version,
// a count per choice beside the tickets polled by every down warp, made the step 0.5 ms slower).
constexpr int kTickets = 0, kFinishedBlocks = 1, kGateDone = 32;
static_assert(kGateDone < kFusedMoeCounterInts);

__device__ __forceinline__ int loadAcquire(const int* p) {
  int v;
  asm volatile("ld.acquire.gpu.global.s32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// gateUpOneTokenKernel and downOneTokenKernel as one kernel, the same arithmetic (so the same
// bits). Why: between the two kernels, down's blocks could not start before gate_up's had left
// their SMs (two gate_up blocks fill an SM's registers), so down's choice and its first weight
// loads waited on gate_up's last block. Here a block chooses once, then takes tickets: the first
// topK x ranges are gate_up's (choice t % topK, range t / topK), the rest down's row blocks. A
// down block loads its first weights, then one thread waits until every gate_up range is done.
// No block waits before every gate_up ticket is taken, and a block that took one runs it to the
// end without waiting, so the kernel finishes whatever number of its blocks fit on the GPU at
// once. The last block to finish zeroes the counters for the next call.
template <typename T, typename G>
__global__ void __launch_bounds__(kWarps * 32, 2) expertsOneTokenKernel(FusedMoeArgs a) {
  __shared__ float outs[kMaxChoices][kDownRows];
  __shared__ BlockChoice choice;
  __shared__ int ticket[2];
  int* counters = a.expertCounters;
  const int topK = int(a.topK), warp = threadIdx.x / 32;
  const int ranges = int((a.inter + kWarps * G::kRows - 1) / (kWarps * G::kRows));
  const int gateTickets = topK * ranges;
  const int tickets = gateTickets + int((a.hidden + kDownRows - 1) / kDownRows);
  // The counters were last used by this layer's previous call, finished kernels ago: the first
  // ticket's latency overlaps the wait for the logits. A ticket goes to shared memory only at the
  // next barrier: warp 0 does not stall on the atomic before its own loads.
  int taken = threadIdx.x == 0 ? atomicAdd(counters + kTickets, 1) : 0;
  waitForPreviousKernel();  // the logits
  allowNextKernel();
  chooseInBlock<T, true>(a, choice);
  int slot = 0;
  const auto publish = [&] {  // the ticket taken, seen by the block after the barrier
    if (threadIdx.x == 0) ticket[slot] = taken;
    __syncthreads();
  };
  const auto take = [&] {  // the ticket after the one running
    slot ^= 1;
    if (threadIdx.x == 0) taken = atomicAdd(counters + kTickets, 1);
  };
  publish();
  // Two loops, gate_up's tickets then down's: in one loop the two bodies' registers added up
  // (hundreds of bytes spilled at the kernel's 128 registers).
  int t = ticket[0];
  for (; t < gateTickets; t = ticket[slot]) {
    take();
    gateUpRange<T, G>(a, choice, t % topK, t / topK);
    if (threadIdx.x % 32 == 0) __threadfence();  // lane 0 wrote h: seen before the count
    publish();
    if (threadIdx.x == 0) atomicAdd(counters + kGateDone, 1);
  }
  bool hReady = false;
  for (; t < tickets; t = ticket[slot]) {
    take();
    const int64_t o0 = int64_t(t - gateTickets) * kDownRows;
    DownRows<T> d;
    const int64_t firstE = warp < topK ? choice.expert[warp] : -1;
    if (firstE >= 0) loadDownRows<T>(a, firstE, o0, d);
    if (!hReady) {  // h whole: after the barrier every thread reads it (through L2)
      if (threadIdx.x == 0) {
        while (loadAcquire(counters + kGateDone) < gateTickets) __nanosleep(256);
      }
      __syncthreads();
      hReady = true;
    }
    for (int j = warp; j < topK; j += kWarps) {
      const int64_t e = choice.expert[j];
      if (e < 0) continue;
      if (j != warp) loadDownRows<T>(a, e, o0, d);
      downChoice<T, true>(a, d, j, choice.weight[j], outs);
    }
    publish();
    combineDownRows<T>(a, choice, outs, o0);
    __syncthreads();  // outs read before the next ticket's writes
  }
  if (threadIdx.x != 0) return;
  __threadfence();
  if (atomicAdd(counters + kFinishedBlocks, 1) != int(gridDim.x) - 1) return;
  // Every block is past its last ticket: nobody reads the counters again in this call.
  for (int i = 0; i < int(kFusedMoeCounterInts); ++i) counters[i] = 0;
  __threadfence();
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

namespace {
// gate_up and down as one kernel (expertsOneTokenKernel) unless SHARDSCOPE_MOE_ONE_KERNEL=0, read
// at each call (to compare in one process; the results are the same bits either way).
bool oneKernel(const FusedMoeArgs& a) {
  const char* v = std::getenv("SHARDSCOPE_MOE_ONE_KERNEL");
  return a.expertCounters && !(v && std::strcmp(v, "0") == 0);
}

// As many blocks as run at once on the device (a block waits only after every gate_up ticket is
// taken, so fewer also finish; more would only queue), or SHARDSCOPE_MOE_ONE_KERNEL_BLOCKS.
template <typename T, typename G>
cudaError_t launchOneKernel(const FusedMoeArgs& a, cudaStream_t stream) {
  const auto kernel = expertsOneTokenKernel<T, G>;
  int device = 0, sms = 0, perSm = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (e == cudaSuccess)
    e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&perSm, kernel, kWarps * 32, 0);
  if (e != cudaSuccess) return e;
  const int64_t ranges = (a.inter + kWarps * G::kRows - 1) / (kWarps * G::kRows);
  const int64_t tickets = a.topK * ranges + (a.hidden + kDownRows - 1) / kDownRows;
  int64_t blocks = std::max<int64_t>(1, std::min<int64_t>(tickets, int64_t(sms) * perSm));
  // Fewer blocks on request (tests: the ticket loops, and that one block alone finishes).
  if (const char* cap = std::getenv("SHARDSCOPE_MOE_ONE_KERNEL_BLOCKS"))
    blocks = std::clamp<int64_t>(std::atoll(cap), 1, blocks);
  return launchKernel(kernel, dim3(unsigned(blocks)), dim3(kWarps * 32), 0, stream, a);
}
}  // namespace

cudaError_t launchOneTokenExperts(const FusedMoeArgs& a, cudaStream_t stream) {
  if (!oneTokenExpertsTake(a)) return cudaErrorInvalidValue;
  return dispatch(a.dtype, [&](auto t) -> cudaError_t {
    using T = decltype(t);
    if (oneKernel(a)) {
      const char* ahead = std::getenv("SHARDSCOPE_MOE_ONE_KERNEL_AHEAD");  // to compare
      return ahead && std::strcmp(ahead, "2") == 0
                 ? launchOneKernel<T, OneKernelGateUpAhead>(a, stream)
                 : launchOneKernel<T, OneKernelGateUp>(a, stream);
    }
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
