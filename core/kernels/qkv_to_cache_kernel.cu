#include "kernel_math.cuh"

namespace shardscope::kernels {
namespace {

// Block (token, head) over the q, k then v heads of the fused row; thread i holds the rotary pair
// (i, i + d/2). q and k: norm (sum of squares over the block), then rotary; v: copied.
template <typename T>
__global__ void qkvToCacheKernel(QkvToCacheArgs a) {
  waitForPreviousKernel();
  allowNextKernel();
  const int64_t t = blockIdx.x, head = blockIdx.y, half = a.headDim / 2;
  const int64_t i = threadIdx.x;
  const bool active = i < half;
  const bool isQ = head < a.qHeads, isV = head >= a.qHeads + a.kvHeads;
  const T* src = static_cast<const T*>(a.qkv) + t * a.qkvStride + head * a.headDim;
  float x1 = active ? toFloat(src[i]) : 0.f, x2 = active ? toFloat(src[i + half]) : 0.f;
  const T* norm = static_cast<const T*>(isQ ? a.qNorm : a.kNorm);
  if (!isV && norm) {  // uniform over the block: every thread reaches blockSum
    const float inv = rsqrtf(blockSum(__fmaf_rn(x1, x1, x2 * x2)) / float(a.headDim) + a.eps);
    if (active) {
      x1 = mulRounded<T>(toFloat(norm[i]), mulRounded<T>(x1, inv));
      x2 = mulRounded<T>(toFloat(norm[i + half]), mulRounded<T>(x2, inv));
    }
  }
  if (!active) return;
  const int64_t p = a.positions[t];
  if (!isV) {
    rotatePair<T>(x1, x2, toFloat(static_cast<const T*>(a.cos)[p * half + i]),
                  toFloat(static_cast<const T*>(a.sin)[p * half + i]));
  }
  T* dst;
  if (isQ) {
    dst = static_cast<T*>(a.qOut) + (t * a.qHeads + head) * a.headDim;
  } else {
    const int64_t kvHead = isV ? head - a.qHeads - a.kvHeads : head - a.qHeads;
    dst = static_cast<T*>(isV ? a.valueCache : a.keyCache) + a.slots[t] * a.slotStride +
          (p * a.kvHeads + kvHead) * a.headDim;
  }
  dst[i] = fromFloat<T>(x1);
  dst[i + half] = fromFloat<T>(x2);
}

}  // namespace

cudaError_t qkvToCache(const QkvToCacheArgs& a, cudaStream_t stream) {
  if (a.tokens == 0) return cudaSuccess;
  if (a.headDim % 2 != 0 || a.headDim / 2 > 1024) return cudaErrorInvalidValue;
  return dispatch(a.dtype, [&](auto t) {
    using T = decltype(t);
    const int threads = int(((a.headDim / 2 + 31) / 32) * 32);
    const dim3 grid(unsigned(a.tokens), unsigned(a.qHeads + 2 * a.kvHeads));
    return launchKernel(qkvToCacheKernel<T>, grid, dim3(unsigned(threads)), 0, stream, a);
  });
}

}  // namespace shardscope::kernels
