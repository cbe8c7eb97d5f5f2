#include "kernel_math.cuh"

namespace shardscope::kernels {
namespace {

// Row r of x by `threads` threads (tid among them), summing with `sum`. Pass 1 adds the residual
// (rounded, written out) and sums squares; pass 2 re-reads the row (this thread's own elements,
// from L1/L2) and writes w * round(x * inv).
template <typename T, int VEC, typename Sum>
__device__ __forceinline__ void normRow(const RmsNormArgs& a, int64_t r, int tid, int threads,
                                        Sum sum) {
  const T* x = static_cast<const T*>(a.x) + (r / a.heads) * a.tokenStride + (r % a.heads) * a.dim;
  const T* residual = a.residual ? static_cast<const T*>(a.residual) + r * a.dim : nullptr;
  T* total = a.residual ? static_cast<T*>(a.residualOut) + r * a.dim : nullptr;
  const T* w = static_cast<const T*>(a.weight);
  T* out = static_cast<T*>(a.out) + r * a.dim;
  const int64_t step = int64_t(threads) * VEC;

  float squares = 0.f;
  for (int64_t i = int64_t(tid) * VEC; i < a.dim; i += step) {
    Vec<T, VEC> v = load<T, VEC>(x + i);
    if (residual) {
      const Vec<T, VEC> rv = load<T, VEC>(residual + i);
#pragma unroll
      for (int j = 0; j < VEC; ++j)
        v.v[j] = fromFloat<T>(__fadd_rn(toFloat(v.v[j]), toFloat(rv.v[j])));
      store<T, VEC>(total + i, v);
    }
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      const float f = toFloat(v.v[j]);
      squares = __fmaf_rn(f, f, squares);
    }
  }
  const float inv = rsqrtf(sum(squares) / float(a.dim) + a.eps);

  const T* src = residual ? total : x;
  for (int64_t i = int64_t(tid) * VEC; i < a.dim; i += step) {
    const Vec<T, VEC> v = load<T, VEC>(src + i), wv = load<T, VEC>(w + i);
    Vec<T, VEC> o;
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      const float normed = mulRounded<T>(toFloat(v.v[j]), inv);  // HF: .to(input dtype)
      o.v[j] = fromFloat<T>(__fmul_rn(toFloat(wv.v[j]), normed));
    }
    store<T, VEC>(out + i, o);
  }
}

// One block per row.
template <typename T, int VEC>
__global__ void rmsNormKernel(RmsNormArgs a) {
  waitForPreviousKernel();
  allowNextKernel();
  normRow<T, VEC>(a, blockIdx.x, threadIdx.x, blockDim.x, [](float x) { return blockSum(x); });
}

// A row a warp, kRowWarps rows a block: for rows one warp covers (a head's q/k norm over a
// prompt's tokens, where a block a row left most of each block idle). Its sum is blockSum's for a
// one-warp block (the same butterfly), so the rows are bit for bit rmsNormKernel's.
constexpr int kRowWarps = 8;
template <typename T, int VEC>
__global__ void rmsNormWarpRowsKernel(RmsNormArgs a) {
  waitForPreviousKernel();
  allowNextKernel();
  const int64_t r = int64_t(blockIdx.x) * kRowWarps + threadIdx.x / 32;
  if (r >= a.rows) return;
  normRow<T, VEC>(a, r, threadIdx.x % 32, 32, [](float x) {
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
  });
}

template <typename T, int VEC>
cudaError_t launch(const RmsNormArgs& a, cudaStream_t stream) {
  // A warp per 32 vectors of a row, at most 8 warps: a head row of 128 gets one warp.
  const int64_t vectors = (a.dim + VEC - 1) / VEC;
  const int threads = int(std::min<int64_t>(256, ((vectors + 31) / 32) * 32));
  if (threads == 32 && a.rows > 1) {
    const auto blocks = unsigned((a.rows + kRowWarps - 1) / kRowWarps);
    return launchKernel(rmsNormWarpRowsKernel<T, VEC>, dim3(blocks), dim3(kRowWarps * 32), 0,
                        stream, a);
  }
  return launchKernel(rmsNormKernel<T, VEC>, dim3(unsigned(a.rows)), dim3(unsigned(threads)), 0,
                      stream, a);
}

}  // namespace

cudaError_t rmsNorm(const RmsNormArgs& a, cudaStream_t stream) {
  if (a.rows == 0) return cudaSuccess;
  return dispatch(a.dtype, [&](auto t) {
    using T = decltype(t);
    constexpr int kVec = 16 / sizeof(T);
    const bool wide = a.dim % kVec == 0 && a.tokenStride % kVec == 0 && aligned(a.x, 16) &&
                      aligned(a.out, 16) && aligned(a.weight, 16) &&
                      (!a.residual || (aligned(a.residual, 16) && aligned(a.residualOut, 16)));
    return wide ? launch<T, kVec>(a, stream) : launch<T, 1>(a, stream);
  });
}

}  // namespace shardscope::kernels
