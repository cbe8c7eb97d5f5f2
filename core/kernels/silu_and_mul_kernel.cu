#include "kernel_math.cuh"

namespace shardscope::kernels {
namespace {

// Each thread VEC outputs: round(round(silu(g)) * u), silu as ATen computes it (x / (1 + exp(-x))
// in fp32).
template <typename T, int VEC>
__global__ void siluAndMulKernel(SiluAndMulArgs a) {
  waitForPreviousKernel();
  allowNextKernel();
  const int64_t perRow = a.half / VEC, total = a.rows * perRow;
  for (int64_t n = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; n < total;
       n += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = n / perRow, i = (n % perRow) * VEC;
    const T* row = static_cast<const T*>(a.x) + r * 2 * a.half;
    const Vec<T, VEC> g = load<T, VEC>(row + i), u = load<T, VEC>(row + a.half + i);
    Vec<T, VEC> o;
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      const float gf = toFloat(g.v[j]);
      const float act = toFloat(fromFloat<T>(__fdiv_rn(gf, __fadd_rn(1.f, expf(-gf)))));
      o.v[j] = fromFloat<T>(__fmul_rn(act, toFloat(u.v[j])));
    }
    store<T, VEC>(static_cast<T*>(a.out) + r * a.half + i, o);
  }
}

template <typename T, int VEC>
cudaError_t launch(const SiluAndMulArgs& a, cudaStream_t stream) {
  const int64_t work = a.rows * (a.half / VEC);
  const int threads = 256;
  const int64_t blocks = std::min<int64_t>((work + threads - 1) / threads, 65536);
  return launchKernel(siluAndMulKernel<T, VEC>, dim3(unsigned(blocks)), dim3(threads), 0, stream,
                      a);
}

}  // namespace

cudaError_t siluAndMul(const SiluAndMulArgs& a, cudaStream_t stream) {
  if (a.rows == 0 || a.half == 0) return cudaSuccess;
  return dispatch(a.dtype, [&](auto t) {
    using T = decltype(t);
    constexpr int kVec = 16 / sizeof(T);
    const bool wide = a.half % kVec == 0 && aligned(a.x, 16) && aligned(a.out, 16);
    return wide ? launch<T, kVec>(a, stream) : launch<T, 1>(a, stream);
  });
}

}  // namespace shardscope::kernels
