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

// The rows of x as a warp reads them: from global memory (through the read-only cache, every warp
// reads them) or from this block's shared memory (the normed rows the block built).
template <typename T, int VEC>
struct GlobalRows {
  const T* p;
  int64_t stride;
  __device__ __forceinline__ Vec<T, VEC> at(int m, int64_t k) const {
    return loadCached<T, VEC>(p + m * stride + k);
  }
};
template <typename T, int VEC>
struct SharedRows {
  const T* p;
  int64_t stride;
  __device__ __forceinline__ Vec<T, VEC> at(int m, int64_t k) const {
    return load<T, VEC>(p + m * stride + k);
  }
};

template <typename T, int ROWS, int VEC, typename X>
__device__ __forceinline__ void accumulate(const Vec<T, VEC>& w, const X& x, int64_t k,
                                           float (&acc)[ROWS]) {
#pragma unroll
  for (int m = 0; m < ROWS; ++m) {
    const Vec<T, VEC> xv = x.at(m, k);
#pragma unroll
    for (int j = 0; j < VEC; ++j) acc[m] = __fmaf_rn(toFloat(w.v[j]), toFloat(xv.v[j]), acc[m]);
  }
}

// One warp's dot products of weight row w (k elements) with every row of x, summed over the warp
// (every lane gets them). The first weights do not depend on the kernel before: they load, then
// `ready` runs (it waits for that kernel, and builds x where x is built here). Then each round
// issues the next round's loads before it multiplies (two sets in flight).
template <typename T, int ROWS, typename X, typename Ready>
__device__ __forceinline__ void dotRow(const T* w, int64_t K, const X& x, float (&acc)[ROWS],
                                       Ready&& ready) {
  constexpr int VEC = 16 / sizeof(T);
  constexpr int64_t kChunk = 32 * VEC;  // elements a warp covers per load
  const int lane = threadIdx.x % 32;
  int64_t k = int64_t(lane) * VEC;
  const auto full = [&](int64_t at) { return at + (kUnroll - 1) * kChunk < K; };
  Vec<T, VEC> wv[kUnroll];
  bool have = full(k);
  if (have) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) wv[u] = loadStreaming<T, VEC>(w + k + u * kChunk);
  }
  ready();
  while (have) {
    const int64_t next = k + kUnroll * kChunk;
    const bool more = full(next);
    Vec<T, VEC> ahead[kUnroll];
    if (more) {
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) ahead[u] = loadStreaming<T, VEC>(w + next + u * kChunk);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) accumulate<T, ROWS, VEC>(wv[u], x, k + u * kChunk, acc);
    k = next;
    have = more;
    if (more) {
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) wv[u] = ahead[u];
    }
  }
  for (; k < K; k += kChunk) accumulate<T, ROWS, VEC>(loadStreaming<T, VEC>(w + k), x, k, acc);
#pragma unroll
  for (int m = 0; m < ROWS; ++m) {
    for (int o = 16; o > 0; o >>= 1) acc[m] += __shfl_xor_sync(0xffffffffu, acc[m], o);
  }
}

// rmsNormKernel's arithmetic on each row of x (plus the residual) into xs [ROWS, k] of shared
// memory, by the block's first kNormThreads threads in rmsNormKernel's element order and sum
// tree (its widest block; a narrower one gives each thread at most one vector, as here), so the
// rows are bit for bit what fused::addRmsNorm writes. Block 0 writes x + residual out.
constexpr int kNormThreads = 256;
template <typename T, int ROWS, int VEC>
__device__ void normRows(const GemvArgs& a, T* xs) {
  const bool team = threadIdx.x < kNormThreads, writer = blockIdx.x == 0 && a.residualOut;
  const T* nw = static_cast<const T*>(a.normWeight);
  constexpr int64_t step = int64_t(kNormThreads) * VEC;
#pragma unroll 1
  for (int m = 0; m < ROWS; ++m) {
    const T* x = static_cast<const T*>(a.x) + m * a.k;
    const T* residual = a.residual ? static_cast<const T*>(a.residual) + m * a.k : nullptr;
    T* row = xs + m * a.k;
    float squares = 0.f;
    for (int64_t i = int64_t(threadIdx.x) * VEC; team && i < a.k; i += step) {
      Vec<T, VEC> v = load<T, VEC>(x + i);
      if (residual) {
        const Vec<T, VEC> rv = load<T, VEC>(residual + i);
#pragma unroll
        for (int j = 0; j < VEC; ++j)
          v.v[j] = fromFloat<T>(__fadd_rn(toFloat(v.v[j]), toFloat(rv.v[j])));
        if (writer) store<T, VEC>(static_cast<T*>(a.residualOut) + m * a.k + i, v);
      }
      store<T, VEC>(row + i, v);
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        const float f = toFloat(v.v[j]);
        squares = __fmaf_rn(f, f, squares);
      }
    }
    const float inv = rsqrtf(blockSum(squares) / float(a.k) + a.eps);
    for (int64_t i = int64_t(threadIdx.x) * VEC; team && i < a.k; i += step) {
      const Vec<T, VEC> v = load<T, VEC>(row + i), wv = load<T, VEC>(nw + i);
      Vec<T, VEC> o;
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        const float normed = mulRounded<T>(toFloat(v.v[j]), inv);
        o.v[j] = fromFloat<T>(__fmul_rn(toFloat(wv.v[j]), normed));
      }
      store<T, VEC>(row + i, o);
    }
  }
  __syncthreads();
}

// What gemv writes for a column (the bias added to the fp32 sum, rounded once) and, for SwiGLU,
// what siluAndMulKernel then makes of a gate and an up column.
template <typename T>
__device__ __forceinline__ T swiGlu(float gate, float up) {
  const float g = toFloat(fromFloat<T>(gate)), u = toFloat(fromFloat<T>(up));
  const float act = toFloat(fromFloat<T>(__fdiv_rn(g, __fadd_rn(1.f, expf(-g)))));
  return fromFloat<T>(__fmul_rn(act, u));
}

// One warp per output column n: the weight row n (with SwiGLU also row n + a.n) is streamed once,
// dotted with every row of x. With NORM, x is first normed into shared memory by the block.
template <typename T, int ROWS, bool NORM, bool SWIGLU>
__global__ void gemvKernel(GemvArgs a) {
  constexpr int VEC = 16 / sizeof(T);
  extern __shared__ __align__(16) unsigned char shared[];
  const int lane = threadIdx.x % 32;
  const int64_t n = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  T* xs = reinterpret_cast<T*>(shared);
  const auto ready = [&] {
    waitForPreviousKernel();
    allowNextKernel();
    if constexpr (NORM) normRows<T, ROWS, VEC>(a, xs);
  };
  if (n >= a.n) {                 // an exited warp counts as done for the dependent launch
    if constexpr (NORM) ready();  // the block's norm needs every thread
    return;
  }
  const T* w = static_cast<const T*>(a.w);
  const T* b = static_cast<const T*>(a.bias);
  float acc[ROWS] = {}, up[ROWS] = {};
  const auto run = [&](const auto& x) {
    dotRow<T, ROWS>(w + n * a.k, a.k, x, acc, ready);
    if constexpr (SWIGLU) dotRow<T, ROWS>(w + (n + a.n) * a.k, a.k, x, up, [] {});
  };
  if constexpr (NORM) {
    run(SharedRows<T, VEC>{xs, a.k});
  } else {
    run(GlobalRows<T, VEC>{static_cast<const T*>(a.x), a.k});
  }
  if (lane != 0) return;
  T* y = static_cast<T*>(a.y);
  const float bg = b ? toFloat(b[n]) : 0.f;
  if constexpr (SWIGLU) {
    const float bu = b ? toFloat(b[n + a.n]) : 0.f;
#pragma unroll
    for (int m = 0; m < ROWS; ++m) y[m * a.n + n] = swiGlu<T>(acc[m] + bg, up[m] + bu);
  } else {
#pragma unroll
    for (int m = 0; m < ROWS; ++m) y[m * a.n + n] = fromFloat<T>(acc[m] + bg);
  }
}

template <typename T, int ROWS, bool NORM, bool SWIGLU>
cudaError_t launch(const GemvArgs& a, cudaStream_t stream) {
  const int64_t blocks = (a.n + kWarpsPerBlock - 1) / kWarpsPerBlock;
  const size_t shared = NORM ? size_t(ROWS * a.k) * sizeof(T) : 0;
  const auto kernel = gemvKernel<T, ROWS, NORM, SWIGLU>;
  if (shared > 48 * 1024) {  // above the default: opt in (gemvNormFits checked the limit)
    const cudaError_t set =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared));
    if (set != cudaSuccess) return set;
  }
  return launchKernel(kernel, dim3(unsigned(blocks)), dim3(kWarpsPerBlock * 32), shared, stream, a);
}

template <typename T, int ROWS>
cudaError_t launchRows(const GemvArgs& a, cudaStream_t stream) {
  const bool norm = a.normWeight != nullptr;
  if (norm && a.swiGlu) return launch<T, ROWS, true, true>(a, stream);
  if (norm) return launch<T, ROWS, true, false>(a, stream);
  if (a.swiGlu) return launch<T, ROWS, false, true>(a, stream);
  return launch<T, ROWS, false, false>(a, stream);
}

}  // namespace

cudaError_t gemv(const GemvArgs& a, cudaStream_t stream) {
  if (a.rows == 0 || a.n == 0) return cudaSuccess;
  return dispatch(a.dtype, [&](auto t) -> cudaError_t {
    using T = decltype(t);
    if (a.k % (16 / int64_t(sizeof(T))) != 0 || !aligned(a.x, 16) || !aligned(a.w, 16))
      return cudaErrorInvalidValue;
    if (a.normWeight && (!aligned(a.normWeight, 16) || (a.residual && !aligned(a.residual, 16)) ||
                         (a.residualOut && !aligned(a.residualOut, 16))))
      return cudaErrorInvalidValue;
    switch (a.rows) {
      case 1:
        return launchRows<T, 1>(a, stream);
      case 2:
        return launchRows<T, 2>(a, stream);
      case 3:
        return launchRows<T, 3>(a, stream);
      case 4:
        return launchRows<T, 4>(a, stream);
      default:
        return cudaErrorInvalidValue;
    }
  });
}

bool gemvNormFits(DType dtype, int64_t rows, int64_t k, int device) {
  int limit = 0;
  if (cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) !=
      cudaSuccess)
    return false;
  const int64_t element = dtype == DType::Float ? 4 : 2;
  // blockSum's partial sums take 128 bytes of the same shared memory
  return rows * k * element + 128 <= int64_t(limit);
}

}  // namespace shardscope::kernels
