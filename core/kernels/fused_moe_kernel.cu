#include "kernel_math.cuh"

namespace shardscope::kernels {
namespace {

constexpr int kWarps = 8;      // one output row per warp
constexpr int kTokenRows = 4;  // tokens dotted with one streamed weight row at a time

// The routing as lists (one block): the distinct local experts chosen, in increasing order, and
// per expert its (token, choice) pairs. Layout of a.routing (int32): [0] used experts U,
// [1 .. 1+U] the experts, [1+S .. 2+S+U] each one's first pair, [2+2S ..] the pairs, where S is
// the number of slots (min(pairs, localExperts)). Later kernels' blocks of slot >= U return at
// once, so a step reads only the chosen experts' weights.
__global__ void routeKernel(FusedMoeArgs a) {
  extern __shared__ int counts[];  // localExperts counts, then as many fill positions
  int* fill = counts + a.localExperts;
  waitForPreviousKernel();
  allowNextKernel();
  const int64_t pairs = a.tokens * a.topK, slots = min(pairs, a.localExperts);
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
  if (threadIdx.x == 0) {
    int u = 0, offset = 0;
    for (int e = 0; e < int(a.localExperts); ++e) {
      if (counts[e] == 0) continue;
      used[u] = e;
      starts[u] = offset;
      fill[e] = offset;  // from here on: where expert e's next pair goes
      offset += counts[e];
      ++u;
    }
    starts[u] = offset;
    a.routing[0] = u;
  }
  __syncthreads();
  for (int64_t p = threadIdx.x; p < pairs; p += blockDim.x) {
    const int64_t e = a.ids[p] - a.firstExpert;
    if (e >= 0 && e < a.localExperts) list[atomicAdd(&fill[e], 1)] = int(p);
  }
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

// acc[m] += w[0..len) . rows[m][0..len) for the `n` (<= kTokenRows) rows, one warp, fp32.
template <typename T>
__device__ __forceinline__ void dotRows(const T* w, const T* const (&rows)[kTokenRows], int n,
                                        int64_t len, float (&acc)[kTokenRows]) {
  constexpr int VEC = 16 / sizeof(T);
  for (int64_t k = int64_t(threadIdx.x % 32) * VEC; k < len; k += 32 * VEC) {
    const Vec<T, VEC> wv = load<T, VEC>(w + k);
#pragma unroll
    for (int m = 0; m < kTokenRows; ++m) {
      if (m >= n) break;
      const Vec<T, VEC> xv = load<T, VEC>(rows[m] + k);
#pragma unroll
      for (int j = 0; j < VEC; ++j) acc[m] = __fmaf_rn(toFloat(wv.v[j]), toFloat(xv.v[j]), acc[m]);
    }
  }
#pragma unroll
  for (int m = 0; m < kTokenRows; ++m) {
    for (int o = 16; o > 0; o >>= 1) acc[m] += __shfl_xor_sync(0xffffffffu, acc[m], o);
  }
}

// h[p, i] = round(round(silu(round(x_t . G_e[i]))) * round(x_t . U_e[i])) for the pairs p = (t, j)
// routed to expert e = blockIdx.x; warp w of block y computes intermediate row i = y * kWarps + w.
template <typename T>
__global__ void gateUpKernel(FusedMoeArgs a) {
  waitForPreviousKernel();
  allowNextKernel();
  Routed routed;
  const int64_t i = int64_t(blockIdx.y) * kWarps + threadIdx.x / 32;
  if (!routedTo(a, routed) || i >= a.inter) return;
  const int n = routed.count;
  const int* pairs = routed.pairs;
  const T* w13 = static_cast<const T*>(a.w13) + int64_t(routed.expert) * 2 * a.inter * a.hidden;
  const T* gate = w13 + i * a.hidden;
  const T* up = w13 + (a.inter + i) * a.hidden;
  for (int c = 0; c < n; c += kTokenRows) {
    const int m = min(kTokenRows, n - c);
    const T* rows[kTokenRows];
    for (int r = 0; r < kTokenRows; ++r)
      rows[r] = static_cast<const T*>(a.x) + (pairs[c + min(r, m - 1)] / a.topK) * a.hidden;
    float g[kTokenRows] = {}, u[kTokenRows] = {};
    dotRows<T>(gate, rows, m, a.hidden, g);
    dotRows<T>(up, rows, m, a.hidden, u);
    if (threadIdx.x % 32 != 0) continue;  // lane 0 writes; the others go on to the next rows
    for (int r = 0; r < m; ++r) {
      const float gr = toFloat(fromFloat<T>(g[r]));
      const float act = toFloat(fromFloat<T>(__fdiv_rn(gr, __fadd_rn(1.f, expf(-gr)))));
      static_cast<T*>(a.h)[int64_t(pairs[c + r]) * a.inter + i] =
          fromFloat<T>(__fmul_rn(act, toFloat(fromFloat<T>(u[r]))));
    }
  }
}

// out[p, o] = round(round(h_p . D_e[o]) * weight_p) for the pairs routed to e = blockIdx.x.
template <typename T>
__global__ void downKernel(FusedMoeArgs a) {
  waitForPreviousKernel();
  allowNextKernel();
  Routed routed;
  const int64_t o = int64_t(blockIdx.y) * kWarps + threadIdx.x / 32;
  if (!routedTo(a, routed) || o >= a.hidden) return;
  const int n = routed.count;
  const int* pairs = routed.pairs;
  const T* w = static_cast<const T*>(a.w2) + (int64_t(routed.expert) * a.hidden + o) * a.inter;
  for (int c = 0; c < n; c += kTokenRows) {
    const int m = min(kTokenRows, n - c);
    const T* rows[kTokenRows];
    for (int r = 0; r < kTokenRows; ++r)
      rows[r] = static_cast<const T*>(a.h) + int64_t(pairs[c + min(r, m - 1)]) * a.inter;
    float d[kTokenRows] = {};
    dotRows<T>(w, rows, m, a.inter, d);
    if (threadIdx.x % 32 != 0) continue;
    for (int r = 0; r < m; ++r) {
      const int64_t p = pairs[c + r];
      const float weight = toFloat(static_cast<const T*>(a.weights)[p]);
      static_cast<T*>(a.out)[p * a.hidden + o] =
          fromFloat<T>(__fmul_rn(toFloat(fromFloat<T>(d[r])), weight));
    }
  }
}

// y[t, o] = the token's local experts' outputs added in increasing expert order, each add
// rounded, from zero (as Hugging Face's index_add_ over experts).
template <typename T>
__global__ void combineKernel(FusedMoeArgs a) {
  waitForPreviousKernel();
  allowNextKernel();
  const int64_t total = a.tokens * a.hidden;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t t = e / a.hidden, o = e % a.hidden;
    const int64_t* ids = a.ids + t * a.topK;
    float y = 0.f;
    int64_t last = -1;
    for (int step = 0; step < a.topK; ++step) {  // the next larger expert id (k is small)
      int pick = -1;
      for (int j = 0; j < a.topK; ++j) {
        if (ids[j] > last && (pick < 0 || ids[j] < ids[pick])) pick = j;
      }
      if (pick < 0) break;
      last = ids[pick];
      if (last < a.firstExpert || last >= a.firstExpert + a.localExperts) continue;
      y = addRounded<T>(y,
                        toFloat(static_cast<const T*>(a.out)[(t * a.topK + pick) * a.hidden + o]));
    }
    static_cast<T*>(a.y)[e] = fromFloat<T>(y);
  }
}

}  // namespace

cudaError_t fusedMoe(const FusedMoeArgs& a, cudaStream_t stream) {
  if (a.tokens == 0) return cudaSuccess;
  if (a.tokens * a.topK > kFusedMoeMaxPairs || a.localExperts > kFusedMoeMaxExperts || !a.routing)
    return cudaErrorInvalidValue;
  return dispatch(a.dtype, [&](auto t) -> cudaError_t {
    using T = decltype(t);
    constexpr int64_t VEC = 16 / sizeof(T);
    if (a.hidden % VEC != 0 || a.inter % VEC != 0) return cudaErrorInvalidValue;
    const unsigned slots = unsigned(std::min(a.tokens * a.topK, a.localExperts));
    const dim3 threads(kWarps * 32);
    cudaError_t e = launchKernel(routeKernel, dim3(1), dim3(1024),
                                 size_t(2 * a.localExperts) * sizeof(int), stream, a);
    if (e != cudaSuccess) return e;
    e = launchKernel(gateUpKernel<T>, dim3(slots, unsigned((a.inter + kWarps - 1) / kWarps)),
                     threads, 0, stream, a);
    if (e != cudaSuccess) return e;
    e = launchKernel(downKernel<T>, dim3(slots, unsigned((a.hidden + kWarps - 1) / kWarps)),
                     threads, 0, stream, a);
    if (e != cudaSuccess) return e;
    const int64_t blocks = std::min<int64_t>((a.tokens * a.hidden + 255) / 256, 4096);
    return launchKernel(combineKernel<T>, dim3(unsigned(blocks)), dim3(256), 0, stream, a);
  });
}

}  // namespace shardscope::kernels
