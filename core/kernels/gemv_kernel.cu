#include "kernel_math.cuh"

namespace shardscope::kernels {
namespace {

constexpr int kWarpsPerBlock = 8;
constexpr int kUnroll = 4;  // 16-byte weight loads in flight per thread

template <typename T, int VEC>
__device__ __forceinline__ Vec<T, VEC> loadStreaming(const T* p) {  // read once: skip L1
  const int4 raw = __ldcs(reinterpret_cast<const int4*>(p));
  return *reinterpret_cast<const Vec<T, VEC>*>(&raw);
}
template <typename T, int VEC>
__device__ __forceinline__ Vec<T, VEC> loadCached(const T* p) {  // x: read by every warp
  const int4 raw = __ldg(reinterpret_cast<const int4*>(p));
  return *reinterpret_cast<const Vec<T, VEC>*>(&raw);
}

template <typename T, int ROWS, int VEC>
__device__ __forceinline__ void accumulate(const Vec<T, VEC>& w, const T* x, int64_t k,
                                           int64_t stride, float (&acc)[ROWS]) {
#pragma unroll
  for (int m = 0; m < ROWS; ++m) {
    const Vec<T, VEC> xv = loadCached<T, VEC>(x + m * stride + k);
#pragma unroll
    for (int j = 0; j < VEC; ++j) acc[m] = __fmaf_rn(toFloat(w.v[j]), toFloat(xv.v[j]), acc[m]);
  }
}

// One warp per output column n: the weight row n is streamed once, dotted with every row of x.
template <typename T, int ROWS>
__global__ void gemvKernel(GemvArgs a) {
  constexpr int VEC = 16 / sizeof(T);
  const int lane = threadIdx.x % 32;
  const int64_t n = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (n >= a.n) return;  // an exited warp counts as done for the dependent launch
  const T* w = static_cast<const T*>(a.w) + n * a.k;
  const T* x = static_cast<const T*>(a.x);
  float acc[ROWS] = {};
  constexpr int64_t kChunk = 32 * VEC;  // elements a warp covers per load
  int64_t k = int64_t(lane) * VEC;
  const auto full = [&](int64_t at) { return at + (kUnroll - 1) * kChunk < a.k; };
  // The first weights do not depend on the kernel before: they load while it finishes. Then
  // each round issues the next round's loads before it multiplies (two sets in flight).
  Vec<T, VEC> wv[kUnroll];
  bool have = full(k);
  if (have) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) wv[u] = loadStreaming<T, VEC>(w + k + u * kChunk);
  }
  waitForPreviousKernel();
  allowNextKernel();
  while (have) {
    const int64_t next = k + kUnroll * kChunk;
    const bool more = full(next);
    Vec<T, VEC> ahead[kUnroll];
    if (more) {
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) ahead[u] = loadStreaming<T, VEC>(w + next + u * kChunk);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) accumulate<T, ROWS, VEC>(wv[u], x, k + u * kChunk, a.k, acc);
    k = next;
    have = more;
    if (more) {
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) wv[u] = ahead[u];
    }
  }
  for (; k < a.k; k += kChunk)
    accumulate<T, ROWS, VEC>(loadStreaming<T, VEC>(w + k), x, k, a.k, acc);
#pragma unroll
  for (int m = 0; m < ROWS; ++m) {
    for (int o = 16; o > 0; o >>= 1) acc[m] += __shfl_xor_sync(0xffffffffu, acc[m], o);
  }
  if (lane != 0) return;
  const float b = a.bias ? toFloat(static_cast<const T*>(a.bias)[n]) : 0.f;
#pragma unroll
  for (int m = 0; m < ROWS; ++m) static_cast<T*>(a.y)[m * a.n + n] = fromFloat<T>(acc[m] + b);
}

template <typename T, int ROWS>
cudaError_t launch(const GemvArgs& a, cudaStream_t stream) {
  const int64_t blocks = (a.n + kWarpsPerBlock - 1) / kWarpsPerBlock;
  return launchKernel(gemvKernel<T, ROWS>, dim3(unsigned(blocks)), dim3(kWarpsPerBlock * 32), 0,
                      stream, a);
}

}  // namespace

cudaError_t gemv(const GemvArgs& a, cudaStream_t stream) {
  if (a.rows == 0 || a.n == 0) return cudaSuccess;
  return dispatch(a.dtype, [&](auto t) -> cudaError_t {
    using T = decltype(t);
    if (a.k % (16 / int64_t(sizeof(T))) != 0 || !aligned(a.x, 16) || !aligned(a.w, 16))
      return cudaErrorInvalidValue;
    switch (a.rows) {
      case 1:
        return launch<T, 1>(a, stream);
      case 2:
        return launch<T, 2>(a, stream);
      case 3:
        return launch<T, 3>(a, stream);
      case 4:
        return launch<T, 4>(a, stream);
      default:
        return cudaErrorInvalidValue;
    }
  });
}

}  // namespace shardscope::kernels
