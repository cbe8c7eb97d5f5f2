#include "kernel_math.cuh"

namespace shardscope::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kLoadsAhead = 8;  // choices whose rows are loaded before any is added

// Block (token t, chunk of VEC * blockDim.x elements): t's choices ordered by expert (the order of
// HF's index_add_; a token's experts are distinct) in shared memory, then each thread adds its
// elements' rounded products in that order, each add rounded. The routing's loads go out together
// (one memory latency, not one a choice).
template <typename T, int VEC>
__global__ void __launch_bounds__(kThreads) moeCombineKernel(MoeCombineArgs a) {
  __shared__ int64_t ids[kMoeCombineMaxTopK], rowOf[kMoeCombineMaxTopK];
  __shared__ float weight[kMoeCombineMaxTopK];
  waitForPreviousKernel();
  allowNextKernel();
  const int64_t t = blockIdx.x, k = a.topK, j = threadIdx.x;
  int64_t id = 0, row = -1;
  float w = 0.f;
  if (j < k) {
    id = a.ids[t * k + j];
    row = a.rowOf[t * k + j];
    w = toFloat(static_cast<const T*>(a.weights)[t * k + j]);
    ids[j] = id;
  }
  __syncthreads();
  if (j < k) {
    int rank = 0;  // choices of lower expert
    for (int64_t i = 0; i < k; ++i) rank += ids[i] < id;
    rowOf[rank] = row;
    weight[rank] = w;
  }
  __syncthreads();
  const int64_t i = (int64_t(blockIdx.y) * blockDim.x + threadIdx.x) * VEC;
  if (i >= a.hidden) return;
  const T* down = static_cast<const T*>(a.down);
  float acc[VEC] = {};
  for (int64_t r0 = 0; r0 < k; r0 += kLoadsAhead) {
    Vec<T, VEC> rows[kLoadsAhead];
#pragma unroll
    for (int u = 0; u < kLoadsAhead; ++u) {
      if (r0 + u < k && rowOf[r0 + u] >= 0)
        rows[u] = load<T, VEC>(down + rowOf[r0 + u] * a.hidden + i);
    }
#pragma unroll
    for (int u = 0; u < kLoadsAhead; ++u) {
      const int64_t r = r0 + u;
      if (r >= k) break;
      const bool here = rowOf[r] >= 0;  // another rank's expert adds a zero row, as in ATen
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        const float c = here ? mulRounded<T>(toFloat(rows[u].v[j]), weight[r]) : 0.f;
        acc[j] = r == 0 ? c : addRounded<T>(acc[j], c);
      }
    }
  }
  Vec<T, VEC> out;
#pragma unroll
  for (int j = 0; j < VEC; ++j) out.v[j] = fromFloat<T>(acc[j]);
  store<T, VEC>(static_cast<T*>(a.y) + t * a.hidden + i, out);
}

template <typename T, int VEC>
cudaError_t launch(const MoeCombineArgs& a, cudaStream_t stream) {
  const int64_t vectors = a.hidden / VEC;
  const int threads = int(std::min<int64_t>(kThreads, ((vectors + 31) / 32) * 32));
  const dim3 grid(unsigned(a.tokens), unsigned((vectors + threads - 1) / threads));
  return launchKernel(moeCombineKernel<T, VEC>, grid, dim3(unsigned(threads)), 0, stream, a);
}

}  // namespace

cudaError_t moeCombine(const MoeCombineArgs& a, cudaStream_t stream) {
  if (a.tokens == 0 || a.hidden == 0) return cudaSuccess;
  if (a.topK < 1 || a.topK > kMoeCombineMaxTopK || a.tokens > INT32_MAX)
    return cudaErrorInvalidValue;
  return dispatch(a.dtype, [&](auto t) {
    using T = decltype(t);
    constexpr int kVec = 16 / sizeof(T);
    const bool wide = a.hidden % kVec == 0 && aligned(a.down, 16) && aligned(a.y, 16);
    return wide ? launch<T, kVec>(a, stream) : launch<T, 1>(a, stream);
  });
}

}  // namespace shardscope::kernels
