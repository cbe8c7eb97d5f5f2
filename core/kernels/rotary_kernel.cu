#include "kernel_math.cuh"

namespace shardscope::kernels {
namespace {

// Block (token, head) over the q heads then the k heads; thread i rotates the pair (i, i + d/2):
// (x1 c - x2 s, x2 c + x1 s), each product and sum rounded as transformers' apply_rotary_pos_emb.
template <typename T>
__global__ void rotaryKernel(RotaryArgs a) {
  waitForPreviousKernel();
  allowNextKernel();
  const int64_t t = blockIdx.x, head = blockIdx.y, half = a.headDim / 2;
  const bool isQ = head < a.qHeads;
  const int64_t h = isQ ? head : head - a.qHeads;
  const T* x =
      static_cast<const T*>(isQ ? a.q : a.k) + t * (isQ ? a.qStride : a.kStride) + h * a.headDim;
  T* out =
      static_cast<T*>(isQ ? a.qOut : a.kOut) + (t * (isQ ? a.qHeads : a.kHeads) + h) * a.headDim;
  const int64_t p = a.positions[t];
  const T* cosRow = static_cast<const T*>(a.cos) + p * half;
  const T* sinRow = static_cast<const T*>(a.sin) + p * half;
  for (int64_t i = threadIdx.x; i < half; i += blockDim.x) {
    float x1 = toFloat(x[i]), x2 = toFloat(x[i + half]);
    rotatePair<T>(x1, x2, toFloat(cosRow[i]), toFloat(sinRow[i]));
    out[i] = fromFloat<T>(x1);
    out[i + half] = fromFloat<T>(x2);
  }
}

}  // namespace

cudaError_t rotary(const RotaryArgs& a, cudaStream_t stream) {
  if (a.tokens == 0 || a.qHeads + a.kHeads == 0) return cudaSuccess;
  return dispatch(a.dtype, [&](auto t) {
    using T = decltype(t);
    const int threads = int(std::min<int64_t>(512, ((a.headDim / 2 + 31) / 32) * 32));
    const dim3 grid(unsigned(a.tokens), unsigned(a.qHeads + a.kHeads));
    return launchKernel(rotaryKernel<T>, grid, dim3(unsigned(threads)), 0, stream, a);
  });
}

}  // namespace shardscope::kernels
