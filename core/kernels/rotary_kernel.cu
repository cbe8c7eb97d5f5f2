#include "kernel_math.cuh"

namespace shardscope::kernels {
namespace {

// A warp per (token, head) row, over the q heads then the k heads of each token, kRowWarps rows a
// block (a block a row launched tens of thousands of 64-thread blocks for a prompt); lane i
// rotates the pairs (j, j + d/2) for j = i, i + 32, ...: (x1 c - x2 s, x2 c + x1 s), each product
// and sum rounded as transformers' apply_rotary_pos_emb.
constexpr int kRowWarps = 8;
template <typename T>
__global__ void rotaryKernel(RotaryArgs a) {
  waitForPreviousKernel();
  allowNextKernel();
  const int64_t heads = a.qHeads + a.kHeads;
  const int64_t row = int64_t(blockIdx.x) * kRowWarps + threadIdx.x / 32;
  if (row >= a.tokens * heads) return;
  const int64_t t = row / heads, head = row % heads, half = a.headDim / 2;
  const bool isQ = head < a.qHeads;
  const int64_t h = isQ ? head : head - a.qHeads;
  const T* x =
      static_cast<const T*>(isQ ? a.q : a.k) + t * (isQ ? a.qStride : a.kStride) + h * a.headDim;
  T* out =
      static_cast<T*>(isQ ? a.qOut : a.kOut) + (t * (isQ ? a.qHeads : a.kHeads) + h) * a.headDim;
  const int64_t p = a.positions[t];
  const T* cosRow = static_cast<const T*>(a.cos) + p * half;
  const T* sinRow = static_cast<const T*>(a.sin) + p * half;
  for (int64_t i = threadIdx.x % 32; i < half; i += 32) {
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
    const int64_t rows = a.tokens * (a.qHeads + a.kHeads);
    const dim3 grid(unsigned((rows + kRowWarps - 1) / kRowWarps));
    return launchKernel(rotaryKernel<T>, grid, dim3(kRowWarps * 32), 0, stream, a);
  });
}

}  // namespace shardscope::kernels
