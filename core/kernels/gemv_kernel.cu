#include <map>
#include <mutex>
#include <tuple>
#include <utility>

#include "core/runtime_switches.h"
#include "kernel_math.cuh"
#include "norm_rows.cuh"

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

template <typename T>
constexpr int64_t kChunk = 32 * (16 / int64_t(sizeof(T)));  // elements a warp covers per load

// Whether a round of kUnroll loads from element `at` on stays inside a row of K.
template <typename T>
__device__ __forceinline__ bool fullRound(int64_t at, int64_t K) {
  return at + (kUnroll - 1) * kChunk<T> < K;
}

// The first round of a weight row (kUnroll loads of 16 bytes a lane, when the row has one).
template <typename T, int VEC>
__device__ __forceinline__ void loadFirstRound(const T* w, int64_t K, Vec<T, VEC> (&wv)[kUnroll]) {
  const int64_t k = int64_t(threadIdx.x % 32) * VEC;
  if (!fullRound<T>(k, K)) return;
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) wv[u] = loadStreaming<T, VEC>(w + k + u * kChunk<T>);
}

// One warp's dot products of weight row w (K elements) with every row of x, summed over the warp
// (every lane gets them). wv holds w's first round (loadFirstRound); each round issues the next
// round's loads before it multiplies (two sets in flight), and the last one loads the first round
// of `next`, the row this warp streams after w (null: none), into wv, so that the loads never
// stop between two rows.
template <typename T, int ROWS, int VEC, typename X>
__device__ __forceinline__ void dotRow(const T* w, const T* next, int64_t K, const X& x,
                                       float (&acc)[ROWS], Vec<T, VEC> (&wv)[kUnroll]) {
  constexpr int64_t chunk = kChunk<T>;
  const int64_t start = int64_t(threadIdx.x % 32) * VEC;
  int64_t k = start;
  const bool rounds = fullRound<T>(k, K);
#pragma unroll 1
  while (rounds && fullRound<T>(k + kUnroll * chunk, K)) {
    const int64_t after = k + kUnroll * chunk;
    Vec<T, VEC> ahead[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) ahead[u] = loadStreaming<T, VEC>(w + after + u * chunk);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) accumulate<T, ROWS, VEC>(wv[u], x, k + u * chunk, acc);
    k = after;
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) wv[u] = ahead[u];
  }
  if (rounds) {  // the row's last round: the next row's first loads go out before it multiplies
    Vec<T, VEC> ahead[kUnroll];
    if (next) {
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) ahead[u] = loadStreaming<T, VEC>(next + start + u * chunk);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) accumulate<T, ROWS, VEC>(wv[u], x, k + u * chunk, acc);
    k += kUnroll * chunk;
    if (next) {
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) wv[u] = ahead[u];
    }
  }
  for (; k < K; k += chunk) accumulate<T, ROWS, VEC>(loadStreaming<T, VEC>(w + k), x, k, acc);
#pragma unroll
  for (int m = 0; m < ROWS; ++m) {
    for (int o = 16; o > 0; o >>= 1) acc[m] += __shfl_xor_sync(0xffffffffu, acc[m], o);
  }
}

__device__ __forceinline__ NormRowsArgs normRowsOf(const GemvArgs& a) {
  return {a.x, a.residual, a.normWeight, a.residualOut, a.k, a.eps};
}

// Warp i of the grid's W computes output columns i, i + W, ... (one each with the full grid): it
// streams weight row n (with SwiGLU the gate row n, then the up row n + a.n) once, dotted with
// every row of x. The first weights do not depend on the kernel before: they load while it
// finishes. With NORM, the block then norms x into shared memory.
template <typename T, int ROWS, bool NORM, bool SWIGLU>
__global__ void gemvKernel(GemvArgs a) {
  constexpr int VEC = 16 / sizeof(T);
  extern __shared__ __align__(16) unsigned char shared[];
  const int lane = threadIdx.x % 32;
  const int64_t warps = int64_t(gridDim.x) * (blockDim.x / 32);
  const int64_t first = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const T* w = static_cast<const T*>(a.w);
  const auto columnOf = [&](int64_t j) { return first + (SWIGLU ? j / 2 : j) * warps; };
  const auto rowAt = [&](int64_t j) -> const T* {  // the j-th weight row this warp streams
    const int64_t n = columnOf(j);
    if (n >= a.n) return nullptr;
    return w + (SWIGLU && j % 2 == 1 ? n + a.n : n) * a.k;
  };
  const T* row = rowAt(0);
  Vec<T, VEC> wv[kUnroll];
  if (row) loadFirstRound<T, VEC>(row, a.k, wv);
  int4 normWeight{};
  if constexpr (NORM) normWeight = normWeightAhead<T, VEC>(normRowsOf(a));
  waitForPreviousKernel();
  allowNextKernel();
  T* xs = reinterpret_cast<T*>(shared);
  // every thread takes part
  if constexpr (NORM) normRows<T, VEC>(normRowsOf(a), ROWS, xs, normWeight);
  if (!row) return;  // an exited warp counts as done for the dependent launch

  const T* b = static_cast<const T*>(a.bias);
  T* y = static_cast<T*>(a.y);
  const auto stream = [&](const auto& x) {
    float gate[ROWS];
#pragma unroll 1
    for (int64_t j = 0; row; ++j) {
      const T* next = NORM || SWIGLU ? rowAt(j + 1) : nullptr;  // plain: one column a warp
      float acc[ROWS] = {};
      dotRow<T, ROWS, VEC>(row, next, a.k, x, acc, wv);
      row = next;
      const int64_t n = columnOf(j);
      if (SWIGLU && j % 2 == 0) {
#pragma unroll
        for (int m = 0; m < ROWS; ++m) gate[m] = acc[m];
        continue;
      }
      if (lane != 0) continue;
      const float bias = b ? toFloat(b[SWIGLU ? n + a.n : n]) : 0.f;
      const float gateBias = SWIGLU && b ? toFloat(b[n]) : 0.f;
#pragma unroll
      for (int m = 0; m < ROWS; ++m) {
        y[m * a.n + n] =
            SWIGLU ? swiGlu<T>(gate[m] + gateBias, acc[m] + bias) : fromFloat<T>(acc[m] + bias);
      }
    }
  };
  if constexpr (NORM) {
    stream(SharedRows<T, VEC>{xs, a.k});
  } else {
    stream(GlobalRows<T, VEC>{static_cast<const T*>(a.x), a.k});
  }
}

// What launching a gemv kernel with `shared` bytes of dynamic shared memory takes on the current
// device: the opt-in past the default 48 KB (counting the kernel's static shared memory too: at
// exactly 48 KB of rows the launch failed; gemvNormFits checked the limit), and how many of its
// blocks fit on the GPU at once. Asked once a kernel, device and size (the answers do not change;
// the launch path is hot), each thread keeping what it learnt; an error is returned and nothing is
// remembered. The opt-in is one value a kernel and device, so it is only ever raised: lowering it
// for a smaller size would fail a later launch of a larger one that its cache lets through.
cudaError_t prepareGemv(const void* kernel, size_t shared, int* blocksAtOnce) {
  using Key = std::tuple<const void*, int, size_t>;
  int device = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e != cudaSuccess) return e;
  const Key key{kernel, device, shared};
  thread_local std::map<Key, int> seen;
  if (const auto it = seen.find(key); it != seen.end()) {
    *blocksAtOnce = it->second;
    return cudaSuccess;
  }
  static std::mutex mutex;
  static std::map<std::pair<const void*, int>, size_t> optedIn;  // the largest size allowed
  const std::lock_guard<std::mutex> lock(mutex);
  cudaFuncAttributes attributes{};
  e = cudaFuncGetAttributes(&attributes, kernel);
  size_t& allowed = optedIn[{kernel, device}];
  if (e == cudaSuccess && shared + attributes.sharedSizeBytes > 48 * 1024 && shared > allowed) {
    e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared));
    if (e == cudaSuccess) allowed = shared;
  }
  int sms = 0, perSm = 0;
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (e == cudaSuccess)
    e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&perSm, kernel, kWarpsPerBlock * 32, shared);
  if (e != cudaSuccess) return e;
  *blocksAtOnce = seen[key] = std::max(1, sms * perSm);
  return cudaSuccess;
}

// A block per kWarpsPerBlock columns; with NORM (each block norms x first) no more blocks than
// fit on the GPU at once, unless SHARDSCOPE_NORM_GEMV_GRID=full (to compare).
template <typename T, int ROWS, bool NORM, bool SWIGLU>
cudaError_t launch(const GemvArgs& a, cudaStream_t stream) {
  const auto kernel = gemvKernel<T, ROWS, NORM, SWIGLU>;
  int64_t blocks = (a.n + kWarpsPerBlock - 1) / kWarpsPerBlock;
  const size_t shared = NORM ? size_t(ROWS * a.k) * sizeof(T) : 0;
  int blocksAtOnce = 0;
  const cudaError_t prepared =
      prepareGemv(reinterpret_cast<const void*>(kernel), shared, &blocksAtOnce);
  if (prepared != cudaSuccess) return prepared;
  if (NORM && !RuntimeSwitches::current().fullNormGemvGrid)
    blocks = std::min<int64_t>(blocks, blocksAtOnce);
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
