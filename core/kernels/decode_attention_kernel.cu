#include "kernel_math.cuh"

namespace shardscope::kernels {
namespace {

constexpr int kThreads = int(kDecodeAttentionChunk);  // one key per thread

// Block (HEADS query heads, request, split): HEADS of the GROUP query heads of one KV head (all
// GROUP, or one) against the split's keys, one key per thread (its row loaded whole, so the loads
// overlap), softmax over the split, then PARTS threads per output dimension sum the values. fp32
// throughout; one rounding at the end. Each head's sums are its own, so HEADS changes no bit of
// the result: one head a block reads the keys GROUP times (from L2) but runs GROUP times more
// blocks, each with a GROUP times shorter chain, which is what a short context needs.
template <typename T, int GROUP, int HEADS, int D>
__global__ void __launch_bounds__(kThreads) decodeAttentionKernel(DecodeAttentionArgs a) {
  static_assert(GROUP % HEADS == 0, "a block takes whole heads of one KV head");
  waitForPreviousKernel();
  allowNextKernel();
  constexpr int VEC = 16 / sizeof(T), PARTS = kThreads / D;
  __shared__ float qs[HEADS][D];
  __shared__ float probs[HEADS][kThreads];
  __shared__ float sums[PARTS][HEADS][D];
  const int64_t firstHead = int64_t(blockIdx.x) * HEADS, kvHead = firstHead / GROUP;
  const int64_t r = blockIdx.y, split = blockIdx.z;
  const int64_t length = a.positions[r] + 1;  // keys 0..position, the new token's included
  const int64_t begin = split * kThreads;
  const int64_t n = begin < length ? min(int64_t(kThreads), length - begin) : 0;
  const T* q = static_cast<const T*>(a.q) + (r * a.qHeads + firstHead) * D;
  for (int i = threadIdx.x; i < HEADS * D; i += kThreads) qs[i / D][i % D] = toFloat(q[i]);
  __syncthreads();

  const int64_t rowStride = a.kvHeads * D, slot = a.slots[r];
  const int64_t base = slot * a.slotStride + begin * rowStride + kvHead * D;
  const T* keys = static_cast<const T*>(a.keyCache) + base;
  const T* values = static_cast<const T*>(a.valueCache) + base;
  const int j = threadIdx.x;
  float score[HEADS];
#pragma unroll
  for (int g = 0; g < HEADS; ++g) score[g] = -INFINITY;
  if (j < n) {
    Vec<T, VEC> row[D / VEC];
#pragma unroll
    for (int c = 0; c < D / VEC; ++c) row[c] = load<T, VEC>(keys + j * rowStride + c * VEC);
#pragma unroll
    for (int g = 0; g < HEADS; ++g) {
      float dot = 0.f;
#pragma unroll
      for (int c = 0; c < D / VEC; ++c) {
#pragma unroll
        for (int u = 0; u < VEC; ++u)
          dot = __fmaf_rn(qs[g][c * VEC + u], toFloat(row[c].v[u]), dot);
      }
      score[g] = dot * a.scale;
    }
  }
  float maxes[HEADS], total[HEADS];
#pragma unroll
  for (int g = 0; g < HEADS; ++g) maxes[g] = score[g];
  blockReduce<HEADS, true>(maxes);
#pragma unroll
  for (int g = 0; g < HEADS; ++g) {
    total[g] = j < n ? expf(score[g] - maxes[g]) : 0.f;
    probs[g][j] = total[g];
  }
  blockReduce<HEADS, false>(total);  // its barrier also publishes probs[]

  const int e = threadIdx.x % D, part = threadIdx.x / D;
  float acc[HEADS] = {};
#pragma unroll 8
  for (int64_t k = part; k < n; k += PARTS) {
    const float v = toFloat(values[k * rowStride + e]);
#pragma unroll
    for (int g = 0; g < HEADS; ++g) acc[g] = __fmaf_rn(probs[g][k], v, acc[g]);
  }
#pragma unroll
  for (int g = 0; g < HEADS; ++g) sums[part][g][e] = acc[g];
  __syncthreads();
  if (part != 0) return;
#pragma unroll
  for (int g = 0; g < HEADS; ++g) {
    float o = 0.f;
#pragma unroll
    for (int p = 0; p < PARTS; ++p) o += sums[p][g][e];
    const int64_t head = firstHead + g;
    if (a.splits == 1) {
      static_cast<T*>(a.out)[(r * a.qHeads + head) * D + e] = fromFloat<T>(o / total[g]);
      continue;
    }
    float* out = a.partial + ((r * a.qHeads + head) * a.splits + split) * (D + 2);
    out[e] = o;
    if (e == 0) {
      out[D] = maxes[g];
      out[D + 1] = total[g];
    }
  }
}

// Block (request, head), thread per dimension: the splits rescaled to the overall maximum.
template <typename T>
__global__ void combineSplitsKernel(DecodeAttentionArgs a) {
  waitForPreviousKernel();
  allowNextKernel();
  const int64_t rh = blockIdx.x, d = a.headDim;
  const float* parts = a.partial + rh * a.splits * (d + 2);
  float m = -INFINITY;
  for (int64_t c = 0; c < a.splits; ++c) m = fmaxf(m, parts[c * (d + 2) + d]);
  for (int64_t e = threadIdx.x; e < d; e += blockDim.x) {
    float acc = 0.f, total = 0.f;
    for (int64_t c = 0; c < a.splits; ++c) {
      const float* part = parts + c * (d + 2);
      const float w = part[d + 1] > 0.f ? expf(part[d] - m) : 0.f;
      acc = __fmaf_rn(w, part[e], acc);
      total = __fmaf_rn(w, part[d + 1], total);
    }
    static_cast<T*>(a.out)[rh * d + e] = fromFloat<T>(acc / total);
  }
}

// One query head a block when the keys fit one block (a short context: the step is latency, and
// GROUP times the blocks hide it); a KV head's whole group a block otherwise (each key read once).
// SHARDSCOPE_ATTENTION_BLOCKS=group keeps a KV head's group a block at any length (to compare:
// the results are the same bits).
bool groupBlocksForced() {
  return RuntimeSwitches::current().groupAttentionBlocks;
}

template <typename T, int GROUP, int D>
cudaError_t launch(const DecodeAttentionArgs& a, cudaStream_t stream) {
  const bool perHead = a.splits == 1 && !groupBlocksForced();
  const auto kernel =
      perHead ? decodeAttentionKernel<T, GROUP, 1, D> : decodeAttentionKernel<T, GROUP, GROUP, D>;
  const dim3 grid(unsigned(perHead ? a.qHeads : a.kvHeads), unsigned(a.requests),
                  unsigned(a.splits));
  const cudaError_t attended = launchKernel(kernel, grid, dim3(kThreads), 0, stream, a);
  if (attended != cudaSuccess || a.splits == 1) return attended;
  return launchKernel(combineSplitsKernel<T>, dim3(unsigned(a.requests * a.qHeads)), dim3(128), 0,
                      stream, a);
}

}  // namespace

bool decodeAttentionSupports(int64_t group, int64_t headDim) {
  return (group == 1 || group == 2 || group == 4 || group == 8) &&
         (headDim == 64 || headDim == 128 || headDim == 256);
}

cudaError_t decodeAttention(const DecodeAttentionArgs& a, cudaStream_t stream) {
  if (a.requests == 0) return cudaSuccess;
  if (a.kvHeads == 0 || a.qHeads % a.kvHeads != 0 || a.splits < 1 || (a.splits > 1 && !a.partial) ||
      !decodeAttentionSupports(a.qHeads / a.kvHeads, a.headDim) || !aligned(a.keyCache, 16) ||
      !aligned(a.valueCache, 16))
    return cudaErrorInvalidValue;
  return dispatch(a.dtype, [&](auto t) -> cudaError_t {
    using T = decltype(t);
    return dispatchAttentionShape(a.qHeads / a.kvHeads, a.headDim, [&](auto group, auto dim) {
      return launch<T, decltype(group)::value, decltype(dim)::value>(a, stream);
    });
  });
}

}  // namespace shardscope::kernels
