#include "kernel_math.cuh"

namespace shardscope::kernels {
namespace {

constexpr int kThreads = int(kDecodeAttentionChunk);  // one key per thread, as decodeAttention

// Sum of the block's per-warp partial sums [first, first + warps), as blockSum adds them (one
// butterfly over a warp whose lanes past `warps` hold zero), so a head's norm here is bit for bit
// qkvToCacheKernel's, whose block is the head's pairs alone.
__device__ __forceinline__ float headSum(const float* partial, int first, int warps) {
  const int lane = threadIdx.x % 32;
  float x = lane < warps ? partial[first + lane] : 0.f;
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

// Asks L2 for the 128-byte lines of [p, p + bytes): a hint, no wait and no register.
__device__ __forceinline__ void prefetchToL2(const void* p, int bytes) {
  for (int c = 0; c < bytes; c += 128)
    asm volatile("prefetch.global.L2 [%0];" ::"l"(static_cast<const char*>(p) + c));
}

// Block (query head, request): qkvToCacheKernel for this head's q and its KV head's k and v, then
// decodeAttentionKernel (one head a block, one chunk of keys) over keys 0..position. The block
// that takes a KV head's first query head writes k and v into the cache; the new key and value
// are used from shared memory, so no block waits for another's write. The keys of earlier steps
// do not depend on the kernel before (only the row at `position` is written this step), so they
// are loaded before the wait for it: their latency overlaps the qkv GEMV's tail. Every value is
// rounded and summed as the two kernels do, so the output and the cache are theirs bit for bit.
template <typename T, int GROUP, int D>
__global__ void __launch_bounds__(kThreads) qkvDecodeAttentionKernel(QkvDecodeAttentionArgs args) {
  constexpr int VEC = 16 / sizeof(T), PARTS = kThreads / D, HALF = D / 2;
  constexpr int kHeadWarps = (HALF + 31) / 32;  // warps of one head's rotary pairs
  static_assert(3 * HALF <= kThreads, "q, k and v each need a thread per rotary pair");
  const QkvToCacheArgs& a = args.cache;
  __shared__ float qs[D], kNew[D], vNew[D];
  __shared__ float probs[kThreads];
  __shared__ float sums[PARTS][D];
  __shared__ float normPartial[2 * kHeadWarps];
  const int64_t head = blockIdx.x, kvHead = head / GROUP, r = blockIdx.y;
  const int64_t p = a.positions[r];  // the new token's row; keys 0..p are attended
  const int64_t n = min(p + 1, int64_t(kThreads)), rowStride = a.kvHeads * D, slot = a.slots[r];
  const int64_t base = slot * a.slotStride + kvHead * D;
  T* keys = static_cast<T*>(a.keyCache) + base;
  T* values = static_cast<T*>(a.valueCache) + base;
  const int j = threadIdx.x;
  // A row of up to 256 bytes is held in registers from here (wider ones spill: they go to L2
  // now and into registers after q is made); the value rows go to L2.
  constexpr bool kRowsEarly = D * sizeof(T) <= 256;
  Vec<T, VEC> row[kRowsEarly ? D / VEC : 1];
  if (j < p) {
    if constexpr (kRowsEarly) {
#pragma unroll
      for (int c = 0; c < D / VEC; ++c) row[c] = load<T, VEC>(keys + j * rowStride + c * VEC);
    } else {
      prefetchToL2(keys + j * rowStride, D * sizeof(T));
    }
    prefetchToL2(values + j * rowStride, D * sizeof(T));
  }
  // Threads [0, HALF): q's rotary pairs (i, i + HALF); [HALF, 2 HALF): k's; [2 HALF, 3 HALF): v's.
  // The pair's norm weights and angle do not depend on the kernel before: loaded before the wait,
  // they leave the path from it (they came after the norm's sum, a memory latency each).
  const int part = j / HALF, i = j % HALF;
  // This thread's first kEarlyValues values of earlier steps (keys valuePart, valuePart + PARTS,
  // ...), held from here: the value sum then waits on no load (it came after two block sums).
  constexpr int kEarlyValues = 8;
  const int e = j % D, valuePart = j / D;
  T early[kEarlyValues];
#pragma unroll
  for (int t = 0; t < kEarlyValues; ++t) {
    const int64_t k = valuePart + int64_t(t) * PARTS;
    if (k < p) early[t] = values[k * rowStride + e];
  }
  const bool active = part < 3, isQ = part == 0, isV = part == 2;
  const T* norm = static_cast<const T*>(isQ ? a.qNorm : a.kNorm);
  const bool turned = active && !isV;
  const float norm1 = turned && norm ? toFloat(norm[i]) : 0.f;
  const float norm2 = turned && norm ? toFloat(norm[i + HALF]) : 0.f;
  const float angleCos = turned ? toFloat(static_cast<const T*>(a.cos)[p * HALF + i]) : 0.f;
  const float angleSin = turned ? toFloat(static_cast<const T*>(a.sin)[p * HALF + i]) : 0.f;
  waitForPreviousKernel();
  allowNextKernel();

  const int64_t qkvHead = isQ ? head : isV ? a.qHeads + a.kvHeads + kvHead : a.qHeads + kvHead;
  const T* src = static_cast<const T*>(a.qkv) + r * a.qkvStride + qkvHead * D;
  float x1 = active ? toFloat(src[i]) : 0.f, x2 = active ? toFloat(src[i + HALF]) : 0.f;
  if (a.qNorm) {  // uniform over the block: every thread reaches the barrier
    float s = __fmaf_rn(x1, x1, x2 * x2);
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (part < 2 && j % 32 == 0) normPartial[j / 32] = s;
    __syncthreads();
    const float total = headSum(normPartial, isQ ? 0 : kHeadWarps, kHeadWarps);
    if (active && !isV) {
      const float inv = rsqrtf(total / float(a.headDim) + a.eps);  // as qkvToCacheKernel
      x1 = mulRounded<T>(norm1, mulRounded<T>(x1, inv));
      x2 = mulRounded<T>(norm2, mulRounded<T>(x2, inv));
    }
  }
  if (active) {
    if (!isV) rotatePair<T>(x1, x2, angleCos, angleSin);
    const T y1 = fromFloat<T>(x1), y2 = fromFloat<T>(x2);
    float* mine = isQ ? qs : isV ? vNew : kNew;
    mine[i] = toFloat(y1);
    mine[i + HALF] = toFloat(y2);
    if (!isQ && head % GROUP == 0) {
      T* dst = (isV ? values : keys) + p * rowStride;
      dst[i] = y1;
      dst[i + HALF] = y2;
    }
  }
  __syncthreads();

  float score = -INFINITY;
  if (j < n) {
    float dot = 0.f;
    if (j < p) {
      Vec<T, VEC> late[kRowsEarly ? 1 : D / VEC];  // the row as decodeAttentionKernel loads it
      if constexpr (!kRowsEarly) {
#pragma unroll
        for (int c = 0; c < D / VEC; ++c) late[c] = load<T, VEC>(keys + j * rowStride + c * VEC);
      }
      const Vec<T, VEC>* key = kRowsEarly ? row : late;
#pragma unroll
      for (int c = 0; c < D / VEC; ++c) {
        const Vec<T, VEC> kc = opaque(key[c]);  // bf16 D 128: 90 registers, not 128 and a spill
#pragma unroll
        for (int u = 0; u < VEC; ++u) dot = __fmaf_rn(qs[c * VEC + u], toFloat(kc.v[u]), dot);
      }
    } else {
#pragma unroll 8
      for (int e = 0; e < D; ++e) dot = __fmaf_rn(qs[e], kNew[e], dot);
    }
    score = dot * args.scale;
  }
  float maximum[1] = {score};  // decodeAttentionKernel's reductions for one head
  blockReduce<1, true>(maximum);
  float total[1] = {j < n ? expf(score - maximum[0]) : 0.f};
  probs[j] = total[0];
  blockReduce<1, false>(total);  // its barrier also publishes probs[]

  float acc = 0.f;
#pragma unroll
  for (int t = 0; t < kEarlyValues; ++t) {
    const int64_t k = valuePart + int64_t(t) * PARTS;
    if (k >= n) break;
    acc = __fmaf_rn(probs[k], k == p ? vNew[e] : toFloat(early[t]), acc);
  }
#pragma unroll 8
  for (int64_t k = valuePart + int64_t(kEarlyValues) * PARTS; k < n; k += PARTS) {
    const float v = k == p ? vNew[e] : toFloat(values[k * rowStride + e]);
    acc = __fmaf_rn(probs[k], v, acc);
  }
  sums[valuePart][e] = acc;
  __syncthreads();
  if (valuePart != 0) return;
  float o = 0.f;
#pragma unroll
  for (int q = 0; q < PARTS; ++q) o += sums[q][e];
  static_cast<T*>(args.out)[(r * a.qHeads + head) * D + e] = fromFloat<T>(o / total[0]);
}

}  // namespace

cudaError_t qkvDecodeAttention(const QkvDecodeAttentionArgs& a, cudaStream_t stream) {
  const QkvToCacheArgs& c = a.cache;
  if (c.tokens == 0) return cudaSuccess;
  if (c.kvHeads == 0 || c.qHeads % c.kvHeads != 0 || !a.out ||
      !decodeAttentionSupports(c.qHeads / c.kvHeads, c.headDim) || !aligned(c.keyCache, 16) ||
      !aligned(c.valueCache, 16) || (c.qNorm == nullptr) != (c.kNorm == nullptr))
    return cudaErrorInvalidValue;
  return dispatch(c.dtype, [&](auto t) -> cudaError_t {
    using T = decltype(t);
    return dispatchAttentionShape(c.qHeads / c.kvHeads, c.headDim, [&](auto group, auto dim) {
      const auto kernel = qkvDecodeAttentionKernel<T, decltype(group)::value, decltype(dim)::value>;
      return launchKernel(kernel, dim3(unsigned(c.qHeads), unsigned(c.tokens)), dim3(kThreads), 0,
                          stream, a);
    });
  });
}

}  // namespace shardscope::kernels
