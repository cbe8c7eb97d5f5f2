#include "kernel_math.cuh"

namespace shardscope::kernels {
namespace {

// A warp per (token, head) row, over the q heads then the k heads of each token, kRowWarps rows a
// block (a block a row launched tens of thousands of 64-thread blocks for a prompt); lane i
// rotates the pairs (j, j + d/2) for the VEC consecutive j from VEC i on, then 32 VEC further:
// (x1 c - x2 s, x2 c + x1 s), each product and sum rounded as transformers' apply_rotary_pos_emb.
constexpr int kRowWarps = 8;
template <typename T, int VEC>
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
  for (int64_t i = int64_t(threadIdx.x % 32) * VEC; i < half; i += 32 * VEC) {
    const Vec<T, VEC> x1 = load<T, VEC>(x + i), x2 = load<T, VEC>(x + i + half);
    const Vec<T, VEC> c = load<T, VEC>(cosRow + i), s = load<T, VEC>(sinRow + i);
    Vec<T, VEC> o1, o2;
#pragma unroll
    for (int v = 0; v < VEC; ++v) {
      float r1 = toFloat(x1.v[v]), r2 = toFloat(x2.v[v]);
      rotatePair<T>(r1, r2, toFloat(c.v[v]), toFloat(s.v[v]));
      o1.v[v] = fromFloat<T>(r1);
      o2.v[v] = fromFloat<T>(r2);
    }
    store<T, VEC>(out + i, o1);
    store<T, VEC>(out + i + half, o2);
  }
}

}  // namespace

cudaError_t rotary(const RotaryArgs& a, cudaStream_t stream) {
  if (a.tokens == 0 || a.qHeads + a.kHeads == 0) return cudaSuccess;
  return dispatch(a.dtype, [&](auto t) {
    using T = decltype(t);
    const int64_t rows = a.tokens * (a.qHeads + a.kHeads);
    const dim3 grid(unsigned((rows + kRowWarps - 1) / kRowWarps));
    // Two elements a load where every row and half-row starts on an even element.
    constexpr int kPair = 2 * int(sizeof(T));
    const bool pairs = (a.headDim / 2) % 2 == 0 && a.qStride % 2 == 0 && a.kStride % 2 == 0 &&
                       aligned(a.q, kPair) && aligned(a.k, kPair) && aligned(a.qOut, kPair) &&
                       aligned(a.kOut, kPair) && aligned(a.cos, kPair) && aligned(a.sin, kPair);
    const auto kernel = pairs ? rotaryKernel<T, 2> : rotaryKernel<T, 1>;
    return launchKernel(kernel, grid, dim3(kRowWarps * 32), 0, stream, a);
  });
}

}  // namespace shardscope::kernels
