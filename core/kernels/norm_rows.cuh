// A block's RMSNorm of a few rows into its shared memory, bit for bit fused::addRmsNorm: what the
// kernels that fold the norm before them (the GEMV, the MoE router) compute first.
#pragma once

#include "kernel_math.cuh"

namespace shardscope::kernels {

// rmsNormKernel's arithmetic on each row of x (plus the residual) into xs [rows, k] of shared
// memory, by the block's first kNormThreads threads in rmsNormKernel's element order and sum
// tree (its widest block; a narrower one gives each thread at most one vector, as here), so the
// rows are bit for bit what fused::addRmsNorm writes. Every thread of the block calls it.
constexpr int kNormThreads = 256;

// This thread's first vector of the norm weight (its only one where k <= kNormThreads * VEC, as
// Qwen3's hidden 2048 in bf16), loaded before the kernel waits on the one before: the weight does
// not depend on it, so its load leaves the path from the wait to the weights' stream.
template <typename T, int VEC>
__device__ __forceinline__ int4 normWeightAhead(const NormRowsArgs& a) {
  static_assert(sizeof(T) * VEC == 16, "16-byte vectors only");
  const int64_t i = int64_t(threadIdx.x) * VEC;
  if (threadIdx.x >= kNormThreads || i >= a.k) return int4{};
  return loadWords(static_cast<const T*>(a.normWeight) + i);
}

// `ahead` is normWeightAhead's.
template <typename T, int VEC>
__device__ void normRows(const NormRowsArgs& a, int rows, T* xs, const int4& ahead) {
  const bool team = threadIdx.x < kNormThreads, writer = blockIdx.x == 0 && a.residualOut;
  const T* nw = static_cast<const T*>(a.normWeight);
  constexpr int64_t step = int64_t(kNormThreads) * VEC;
#pragma unroll 1
  for (int m = 0; m < rows; ++m) {
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
      const Vec<T, VEC> v = load<T, VEC>(row + i);
      const Vec<T, VEC> wv =
          i == int64_t(threadIdx.x) * VEC ? asVec<T, VEC>(ahead) : load<T, VEC>(nw + i);
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

}  // namespace shardscope::kernels
