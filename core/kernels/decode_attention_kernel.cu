#include "kernel_math.cuh"

namespace shardscope::kernels {
namespace {

constexpr int kThreads = 128;

// Block (KV head, request, split): the GROUP query heads of one KV head against the split's
// keys. Scores go to shared memory (one thread per key), softmax over the split, then one thread
// per output dimension sums the values. fp32 throughout; one rounding at the end.
template <typename T, int GROUP>
__global__ void decodeAttentionKernel(DecodeAttentionArgs a) {
  waitForPreviousKernel();
  allowNextKernel();
  constexpr int VEC = 16 / sizeof(T);
  const int64_t kvHead = blockIdx.x, r = blockIdx.y, split = blockIdx.z, d = a.headDim;
  const int64_t length = a.positions[r] + 1;  // keys 0..position, the new token's included
  const int64_t begin = split * a.chunk;
  const int64_t n = begin < length ? min(a.chunk, length - begin) : 0;
  extern __shared__ float shared[];
  float* qs = shared;                  // [GROUP, d]
  float* scores = shared + GROUP * d;  // [GROUP, chunk]
  const T* q = static_cast<const T*>(a.q) + (r * a.qHeads + kvHead * GROUP) * d;
  for (int64_t i = threadIdx.x; i < GROUP * d; i += blockDim.x) qs[i] = toFloat(q[i]);
  __syncthreads();

  const int64_t rowStride = a.kvHeads * d, slot = a.slots[r];
  const T* keys =
      static_cast<const T*>(a.keyCache) + slot * a.slotStride + begin * rowStride + kvHead * d;
  const T* values =
      static_cast<const T*>(a.valueCache) + slot * a.slotStride + begin * rowStride + kvHead * d;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
    const T* k = keys + j * rowStride;
    float dot[GROUP] = {};
    for (int64_t e = 0; e < d; e += VEC) {
      const Vec<T, VEC> kv = load<T, VEC>(k + e);
#pragma unroll
      for (int u = 0; u < VEC; ++u) {
        const float kf = toFloat(kv.v[u]);
#pragma unroll
        for (int g = 0; g < GROUP; ++g) dot[g] = __fmaf_rn(qs[g * d + e + u], kf, dot[g]);
      }
    }
#pragma unroll
    for (int g = 0; g < GROUP; ++g) scores[g * a.chunk + j] = dot[g] * a.scale;
  }
  __syncthreads();

  float maxes[GROUP], sums[GROUP];
#pragma unroll
  for (int g = 0; g < GROUP; ++g) {
    float m = -INFINITY;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) m = fmaxf(m, scores[g * a.chunk + j]);
    m = blockMax(m);
    float s = 0.f;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      const float p = expf(scores[g * a.chunk + j] - m);
      scores[g * a.chunk + j] = p;
      s += p;
    }
    maxes[g] = m;
    sums[g] = blockSum(s);
  }
  __syncthreads();

  for (int64_t e = threadIdx.x; e < d; e += blockDim.x) {
    float acc[GROUP] = {};
#pragma unroll 8
    for (int64_t j = 0; j < n; ++j) {
      const float v = toFloat(values[j * rowStride + e]);
#pragma unroll
      for (int g = 0; g < GROUP; ++g) acc[g] = __fmaf_rn(scores[g * a.chunk + j], v, acc[g]);
    }
#pragma unroll
    for (int g = 0; g < GROUP; ++g) {
      const int64_t head = kvHead * GROUP + g;
      if (a.splits == 1) {
        static_cast<T*>(a.out)[(r * a.qHeads + head) * d + e] = fromFloat<T>(acc[g] / sums[g]);
        continue;
      }
      float* part = a.partial + ((r * a.qHeads + head) * a.splits + split) * (d + 2);
      part[e] = acc[g];
      if (e == 0) {
        part[d] = maxes[g];
        part[d + 1] = sums[g];
      }
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

template <typename T, int GROUP>
cudaError_t launch(const DecodeAttentionArgs& a, cudaStream_t stream) {
  const size_t shared = sizeof(float) * size_t(GROUP) * size_t(a.headDim + a.chunk);
  const dim3 grid(unsigned(a.kvHeads), unsigned(a.requests), unsigned(a.splits));
  const cudaError_t attended =
      launchKernel(decodeAttentionKernel<T, GROUP>, grid, dim3(kThreads), shared, stream, a);
  if (attended != cudaSuccess || a.splits == 1) return attended;
  return launchKernel(combineSplitsKernel<T>, dim3(unsigned(a.requests * a.qHeads)), dim3(kThreads),
                      0, stream, a);
}

}  // namespace

cudaError_t decodeAttention(const DecodeAttentionArgs& a, cudaStream_t stream) {
  if (a.requests == 0) return cudaSuccess;
  if (a.kvHeads == 0 || a.qHeads % a.kvHeads != 0 || a.chunk <= 0 || a.splits < 1 ||
      (a.splits > 1 && !a.partial))
    return cudaErrorInvalidValue;
  return dispatch(a.dtype, [&](auto t) -> cudaError_t {
    using T = decltype(t);
    if (a.headDim % (16 / int64_t(sizeof(T))) != 0 || !aligned(a.keyCache, 16) ||
        (a.slotStride * int64_t(sizeof(T))) % 16 != 0)
      return cudaErrorInvalidValue;
    switch (a.qHeads / a.kvHeads) {
      case 1:
        return launch<T, 1>(a, stream);
      case 2:
        return launch<T, 2>(a, stream);
      case 3:
        return launch<T, 3>(a, stream);
      case 4:
        return launch<T, 4>(a, stream);
      case 5:
        return launch<T, 5>(a, stream);
      case 6:
        return launch<T, 6>(a, stream);
      case 7:
        return launch<T, 7>(a, stream);
      case 8:
        return launch<T, 8>(a, stream);
      default:
        return cudaErrorInvalidValue;
    }
  });
}

}  // namespace shardscope::kernels
