#include <climits>
#include <cmath>

#include "expert_rows.cuh"
#include "fused_moe_one_token.cuh"
#include "kernel_math.cuh"
#include "moe_select.cuh"
#include "norm_rows.cuh"

namespace shardscope::kernels {
namespace {

static_assert(kMoeRouterMaxTokens <= kTokenRows, "the router kernel keeps a sum per token");

// Per token, its choices in increasing expert order (the order of Hugging Face's adds), -1 for
// another rank's expert: topK ints a token, after the lists.
__device__ __forceinline__ int* addOrder(const FusedMoeArgs& a) {
  const int64_t pairs = a.tokens * a.topK, slots = min(pairs, a.localExperts);
  return a.routing + 2 + 2 * slots + pairs;
}
// Where the down kernel's blocks count themselves done, one int per range of rows (a block's;
// room for ranges of kFusedMoeRowsPerBlock rows, the narrowest variant's).
__device__ __forceinline__ int* doneCounts(const FusedMoeArgs& a) {
  return addOrder(a) + a.tokens * a.topK;
}

// The routing as lists (one block), after the choice itself when a.select.logits is set (then
// a.ids and a.weights point at the choice's output): the distinct local experts chosen, in
// increasing order, and per expert its (token, choice) pairs. Layout of a.routing (int32): [0]
// used experts U, [1 .. 1+U] the experts, [1+S .. 2+S+U] each one's first pair, [2+2S ..] the
// pairs, where S is the number of slots (min(pairs, localExperts)), then each token's add order
// (addOrder), then the down kernel's done counts, zeroed here. Later kernels' blocks of slot >= U
// do no work, so a step reads only the chosen experts' weights. One block; `counts` is shared
// memory for 2 * localExperts ints.
template <typename T>
__device__ void routeBlock(const FusedMoeArgs& a, int* counts) {
  int* fill = counts + a.localExperts;  // after the counts: each expert's next list position
  if (a.select.logits) {
    for (int64_t t = threadIdx.x / 32; t < a.tokens; t += blockDim.x / 32)
      selectToken<T>(a.select, t, int(a.topK));
    __syncthreads();  // the choice, in global memory, is read below by other warps
  }
  int* done = doneCounts(a);
  // As many counts as ranges of the narrowest variant: enough for either variant's down kernel.
  for (int64_t r = threadIdx.x; r * kFusedMoeRowsPerBlock < a.hidden; r += blockDim.x) done[r] = 0;
  const int64_t pairs = a.tokens * a.topK, slots = min(pairs, a.localExperts);
  int* order = addOrder(a);
  for (int64_t p = threadIdx.x; p < pairs; p += blockDim.x) {
    const int64_t t = p / a.topK, j = p % a.topK, id = a.ids[p];
    int rank = 0;  // choices before this one in increasing expert order (equal ids by choice)
    // Unrolled: the id loads in flight together, not one L2 round trip after another.
#pragma unroll 8
    for (int64_t i = 0; i < a.topK; ++i) {
      const int64_t other = a.ids[t * a.topK + i];
      rank += other < id || (other == id && i < j);
    }
    const bool local = id >= a.firstExpert && id < a.firstExpert + a.localExperts;
    order[t * a.topK + rank] = local ? int(j) : -1;
  }
  int* used = a.routing + 1;
  int* starts = a.routing + 1 + slots;
  int* list = a.routing + 2 + 2 * slots;
  for (int64_t e = threadIdx.x; e < a.localExperts; e += blockDim.x) counts[e] = fill[e] = 0;
  __syncthreads();
  for (int64_t p = threadIdx.x; p < pairs; p += blockDim.x) {
    const int64_t e = a.ids[p] - a.firstExpert;
    if (e >= 0 && e < a.localExperts) atomicAdd(&counts[e], 1);
  }
  __syncthreads();
  if (threadIdx.x < 32) {  // one warp lists the used experts, 32 at a time (a ballot and a scan)
    const int lane = threadIdx.x;
    int u = 0, offset = 0;
    for (int base = 0; base < int(a.localExperts); base += 32) {
      const int e = base + lane;
      const int count = e < a.localExperts ? counts[e] : 0;
      const unsigned hit = __ballot_sync(kFull, count > 0);
      int upTo = count;  // counts of lanes 0..lane
      for (int o = 1; o < 32; o <<= 1) {
        const int v = __shfl_up_sync(kFull, upTo, o);
        if (lane >= o) upTo += v;
      }
      if (count > 0) {
        const int slot = u + __popc(hit & ((1u << lane) - 1));
        used[slot] = e;
        starts[slot] = offset + upTo - count;
        fill[e] = offset + upTo - count;  // from here on: where expert e's next pair goes
      }
      u += __popc(hit);
      offset += __shfl_sync(kFull, upTo, 31);
    }
    if (lane == 0) {
      starts[u] = offset;
      a.routing[0] = u;
    }
  }
  __syncthreads();
  for (int64_t p = threadIdx.x; p < pairs; p += blockDim.x) {
    const int64_t e = a.ids[p] - a.firstExpert;
    if (e >= 0 && e < a.localExperts) list[atomicAdd(&fill[e], 1)] = int(p);
  }
}

// One block of kRouteThreads: the bound keeps the registers within what 1024 threads may hold.
constexpr int kRouteThreads = 1024;
template <typename T>
__global__ void __launch_bounds__(kRouteThreads) routeKernel(FusedMoeArgs a) {
  extern __shared__ int counts[];
  waitForPreviousKernel();
  allowNextKernel();
  routeBlock<T>(a, counts);
}

// The router kernel's normed rows' bytes (moeRouterNormBytes), before the routing's counts.
template <typename T>
__host__ __device__ __forceinline__ size_t routerNormBytes(const FusedMoeArgs& a) {
  return moeRouterNormBytes(sizeof(T), a.tokens, a.hidden, a.norm.normWeight != nullptr);
}

// The router's GEMV and the routing in one launch (a.routerWeight set, at most kTokenRows
// tokens): warp w of block b computes logits row e = b * kWarps + w for every token, in the
// GEMV kernel's order of adds and rounding (so the logits equal fused::gemv's); the last block
// to finish (a.routerDone counts the blocks and wraps back to zero) then chooses and lists. With
// NORM, every block first norms x (normRows, bit for bit fused::addRmsNorm) into its shared
// memory, and block 0 writes the rows out for the expert kernels. Without ROUTE the kernel ends
// at the logits: the one-token expert kernels choose from them themselves.
template <typename T, bool NORM, bool ROUTE>
__global__ void routerKernel(FusedMoeArgs a) {
  extern __shared__ __align__(16) unsigned char routerShared[];
  int* counts = reinterpret_cast<int*>(routerShared + routerNormBytes<T>(a));
  constexpr int VEC = 16 / sizeof(T);
  const int lane = threadIdx.x % 32;
  const int64_t e = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32;
  RouterRowDot<T, kTokenRows> row(a, e);
  const bool mine = row.mine;
  T* xs = reinterpret_cast<T*>(routerShared);
  const T* x = NORM ? xs : static_cast<const T*>(a.x);
  int4 normWeight{};
  if constexpr (NORM) normWeight = normWeightAhead<T, VEC>(a.norm);
  waitForPreviousKernel();
  allowNextKernel();
  if constexpr (NORM) {
    normRows<T, VEC>(a.norm, int(a.tokens), xs, normWeight);  // ends with a barrier: xs is whole
    if (blockIdx.x == 0) {
      for (int64_t i = int64_t(threadIdx.x) * VEC; i < a.tokens * a.hidden; i += blockDim.x * VEC)
        store<T, VEC>(static_cast<T*>(a.normed) + i, load<T, VEC>(xs + i));
    }
  }
  float acc[kTokenRows];
  row.dot(x, a.tokens, acc);
  if (mine && lane == 0) {
    for (int m = 0; m < int(a.tokens); ++m)
      static_cast<T*>(a.routerLogits)[m * a.select.experts + e] = fromFloat<T>(acc[m]);
  }
  if constexpr (!ROUTE) return;
  __shared__ bool last;
  __threadfence();  // this block's logits are visible before it counts itself done
  __syncthreads();
  if (threadIdx.x == 0) last = atomicInc(a.routerDone, gridDim.x - 1) == gridDim.x - 1;
  __syncthreads();
  if (last) routeBlock<T>(a, counts);
}

// This block's expert (local index) and its pairs; false when the slot is unused.
struct Routed {
  int expert = 0, count = 0;
  const int* pairs = nullptr;
};
__device__ __forceinline__ bool routedTo(const FusedMoeArgs& a, Routed& r) {
  const int64_t slots = min(a.tokens * a.topK, a.localExperts);
  if (int(blockIdx.x) >= a.routing[0]) return false;
  const int* starts = a.routing + 1 + slots;
  r.expert = a.routing[1 + blockIdx.x];
  r.pairs = a.routing + 2 + 2 * slots + starts[blockIdx.x];
  r.count = starts[blockIdx.x + 1] - starts[blockIdx.x];
  return true;
}

// h[p, i] = round(round(silu(round(x_t . G_e[i]))) * round(x_t . U_e[i])) for the pairs p = (t, j)
// routed to expert e = blockIdx.x; warp w of block y computes intermediate rows i = (y * kWarps +
// w) * kRows + g, g < kRows (a row past inter is computed on the last row and not written).
template <typename T, typename V>
__global__ void __launch_bounds__(kWarps * 32, V::kMinBlocks) gateUpKernel(FusedMoeArgs a) {
  constexpr int R = V::kRows;
  waitForPreviousKernel();
  allowNextKernel();
  Routed routed;
  const int64_t i0 = (int64_t(blockIdx.y) * kWarps + threadIdx.x / 32) * R;
  if (!routedTo(a, routed) || i0 >= a.inter) return;
  const int n = routed.count;
  const int* pairs = routed.pairs;
  const T* gateUp[2 * R];
  gateUpRowPointers<T, R>(
      static_cast<const T*>(a.w13) + int64_t(routed.expert) * 2 * a.inter * a.hidden, i0, a.inter,
      a.hidden, gateUp);
  constexpr int TR = V::kTokens;
  for (int c = 0; c < n; c += TR) {
    const int m = min(TR, n - c);
    const T* rows[TR];
    for (int r = 0; r < TR; ++r)
      rows[r] = static_cast<const T*>(a.x) + (pairs[c + min(r, m - 1)] / a.topK) * a.hidden;
    float acc[2 * R][TR] = {};
    dotRows<T, 2 * R, V::kAhead, TR>(gateUp, rows, m, a.hidden, acc);
    if (threadIdx.x % 32 != 0) continue;  // lane 0 writes; the others go on to the next rows
#pragma unroll
    for (int g = 0; g < R; ++g) {
      const int64_t i = i0 + g;
      if (i >= a.inter) break;
#pragma unroll
      for (int r = 0; r < TR; ++r) {
        if (r >= m) break;
        static_cast<T*>(a.h)[int64_t(pairs[c + r]) * a.inter + i] =
            swiGlu<T>(acc[2 * g][r], acc[2 * g + 1][r]);
      }
    }
  }
}

// y[t, o] for the rows o of this block's range (`range` rows from blockIdx.y * range): the token's
// local experts' outputs added in increasing expert order (addOrder), each add rounded, from zero
// (as Hugging Face's index_add_ over experts), read from `out` through L2 (other blocks wrote
// them).
template <typename T>
__device__ void combineRows(const FusedMoeArgs& a, int64_t range) {
  constexpr int kBatch = 8;  // loads issued together before their adds
  const int64_t first = int64_t(blockIdx.y) * range;
  const int64_t rows = min(range, a.hidden - first);
  const T* out = static_cast<const T*>(a.out);
  for (int64_t i = threadIdx.x; i < a.tokens * rows; i += blockDim.x) {
    const int64_t t = i / rows, o = first + i % rows;
    const int* order = addOrder(a) + t * a.topK;
    float y = 0.f;
    for (int r0 = 0; r0 < a.topK; r0 += kBatch) {
      float v[kBatch];
      bool mine[kBatch];
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        const int j = r0 + b < a.topK ? order[r0 + b] : -1;
        mine[b] = j >= 0;
        v[b] = mine[b] ? toFloat(__ldcg(out + (t * a.topK + j) * a.hidden + o)) : 0.f;
      }
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        if (mine[b]) y = addRounded<T>(y, v[b]);
      }
    }
    static_cast<T*>(a.y)[t * a.hidden + o] = fromFloat<T>(y);
  }
}

// out[p, o] = round(round(h_p . D_e[o]) * weight_p) for the pairs routed to e = blockIdx.x, rows
// o of range blockIdx.y (kWarps * kRows rows; warp w computes o = first + w * kRows + r, r <
// kRows, a row past hidden computed on the last row and not written); the last block of a range
// to finish (a count, not a sum: the order of the adds is fixed, so results do not depend on
// which block is last) then combines the range.
template <typename T, typename V>
__global__ void __launch_bounds__(kWarps * 32, V::kMinBlocks) downKernel(FusedMoeArgs a) {
  constexpr int R = V::kRows;
  constexpr int64_t kRange = int64_t(kWarps) * R;
  waitForPreviousKernel();
  allowNextKernel();
  Routed routed;
  const int64_t o0 = int64_t(blockIdx.y) * kRange + int64_t(threadIdx.x / 32) * R;
  if (routedTo(a, routed) && o0 < a.hidden) {
    const int n = routed.count;
    const int* pairs = routed.pairs;
    const T* w2 = static_cast<const T*>(a.w2) + int64_t(routed.expert) * a.hidden * a.inter;
    const T* w[R];
#pragma unroll
    for (int r = 0; r < R; ++r) w[r] = w2 + min(o0 + r, a.hidden - 1) * a.inter;
    constexpr int TR = V::kTokens;
    for (int c = 0; c < n; c += TR) {
      const int m = min(TR, n - c);
      const T* rows[TR];
      for (int r = 0; r < TR; ++r)
        rows[r] = static_cast<const T*>(a.h) + int64_t(pairs[c + min(r, m - 1)]) * a.inter;
      float acc[R][TR] = {};
      dotRows<T, R, V::kAhead, TR>(w, rows, m, a.inter, acc);
      if (threadIdx.x % 32 != 0) continue;
#pragma unroll
      for (int r = 0; r < TR; ++r) {
        if (r >= m) break;
        const int64_t p = pairs[c + r];
        const float weight = toFloat(static_cast<const T*>(a.weights)[p]);
#pragma unroll
        for (int g = 0; g < R; ++g) {
          const int64_t o = o0 + g;
          if (o >= a.hidden) break;
          static_cast<T*>(a.out)[p * a.hidden + o] =
              fromFloat<T>(__fmul_rn(toFloat(fromFloat<T>(acc[g][r])), weight));
        }
      }
    }
  }
  __shared__ bool last;
  __threadfence();  // this block's outputs are visible before it counts itself done
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(doneCounts(a) + blockIdx.y, 1) == int(gridDim.x) - 1;
  __syncthreads();
  if (last) combineRows<T>(a, kRange);
}

// The wide kernels for one token unless SHARDSCOPE_MOE_WIDE=0 (to compare; the results are the
// same bits either way).
bool wideExpertKernels() {
  return RuntimeSwitches::current().moeWide;
}

// gate_up + SwiGLU, then down (and the combine), with G / D rows a warp.
template <typename T, typename G, typename D>
cudaError_t launchExperts(const FusedMoeArgs& a, unsigned slots, cudaStream_t stream) {
  constexpr int64_t kGateRange = int64_t(kWarps) * G::kRows,
                    kDownRange = int64_t(kWarps) * D::kRows;
  // No more row ranges (done counts) than fusedMoeRoutingInts makes room for.
  static_assert(kDownRange >= kFusedMoeRowsPerBlock, "more done counts than the buffer holds");
  const dim3 threads(kWarps * 32);
  const cudaError_t e = launchKernel(gateUpKernel<T, G>,
                                     dim3(slots, unsigned((a.inter + kGateRange - 1) / kGateRange)),
                                     threads, 0, stream, a);
  if (e != cudaSuccess) return e;
  return launchKernel(downKernel<T, D>,
                      dim3(slots, unsigned((a.hidden + kDownRange - 1) / kDownRange)), threads, 0,
                      stream, a);
}

}  // namespace

cudaError_t fusedMoe(const FusedMoeArgs& args, cudaStream_t stream) {
  if (args.tokens == 0) return cudaSuccess;
  if (args.tokens * args.topK > kFusedMoeMaxPairs || args.localExperts > kFusedMoeMaxExperts ||
      !args.routing || args.topK > kMoeSelectMaxTopK)
    return cudaErrorInvalidValue;
  FusedMoeArgs a = args;
  if (a.routerWeight) {  // the first kernel computes the logits it chooses from
    if (!a.routerLogits || !a.routerDone || a.tokens > kMoeRouterMaxTokens ||
        a.select.experts < 1 || !aligned(a.routerWeight, 16) || !aligned(a.x, 16))
      return cudaErrorInvalidValue;
    a.select.logits = a.routerLogits;
  }
  if (a.norm.normWeight) {  // the router kernel norms x first
    if (!a.routerWeight || !a.normed || a.norm.x != a.x || a.norm.k != a.hidden ||
        !aligned(a.normed, 16) || !aligned(a.norm.normWeight, 16) ||
        (a.norm.residual && !aligned(a.norm.residual, 16)) ||
        (a.norm.residualOut && !aligned(a.norm.residualOut, 16)))
      return cudaErrorInvalidValue;
  }
  if (a.select.logits) {  // the later kernels read the choice the first one makes
    if (!a.select.ids || !a.select.weights || a.select.experts < a.topK)
      return cudaErrorInvalidValue;
    a.ids = a.select.ids;
    a.weights = a.select.weights;
  }
  return dispatch(a.dtype, [&](auto t) -> cudaError_t {
    using T = decltype(t);
    constexpr int64_t VEC = 16 / sizeof(T);
    if (a.hidden % VEC != 0 || a.inter % VEC != 0) return cudaErrorInvalidValue;
    const unsigned slots = unsigned(std::min(a.tokens * a.topK, a.localExperts));
    const dim3 threads(kWarps * 32);
    const size_t counts = size_t(2 * a.localExperts) * sizeof(int);  // the routing kernel's
    const size_t shared = moeRouterSharedBytes(sizeof(T), a.tokens, a.hidden, a.localExperts,
                                               a.norm.normWeight != nullptr);
    if (shared > kMoeRouterMaxShared) return cudaErrorInvalidValue;
    const unsigned routerBlocks = unsigned((a.select.experts + kWarps - 1) / kWarps);
    const bool oneToken = wideExpertKernels() && oneTokenExpertsTake(a);
    const bool norm = a.norm.normWeight != nullptr;
    const auto router = oneToken
                            ? (norm ? routerKernel<T, true, false> : routerKernel<T, false, false>)
                            : (norm ? routerKernel<T, true, true> : routerKernel<T, false, true>);
    cudaError_t e = cudaSuccess;
    if (a.routerWeight)
      e = launchKernel(router, dim3(routerBlocks), threads, shared, stream, a);
    else if (!oneToken)  // the logits or the choice came in: only the lists to make
      e = launchKernel(routeKernel<T>, dim3(1), dim3(kRouteThreads), counts, stream, a);
    if (e != cudaSuccess) return e;
    FusedMoeArgs experts = a;
    if (a.norm.normWeight) experts.x = a.normed;  // the rows the router normed
    if (oneToken) return launchOneTokenExperts(experts, stream);
    return a.tokens == 1 && wideExpertKernels()
               ? launchExperts<T, WideGateUp, WideDown>(experts, slots, stream)
               : launchExperts<T, NarrowGateUp, NarrowDown>(experts, slots, stream);
  });
}

}  // namespace shardscope::kernels
