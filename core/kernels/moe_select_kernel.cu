#include "moe_select.cuh"

namespace shardscope::kernels {
namespace {

// The choice alone (moeSelect): one warp per token.
template <typename T>
__global__ void selectKernel(MoeSelectArgs s, int64_t tokens, int topK) {
  waitForPreviousKernel();
  allowNextKernel();
  const int64_t t = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (t < tokens) selectToken<T>(s, t, topK);
}

}  // namespace

cudaError_t moeSelect(DType dtype, const MoeSelectArgs& s, int64_t tokens, int64_t topK,
                      cudaStream_t stream) {
  if (tokens == 0) return cudaSuccess;
  if (topK < 1 || topK > kMoeSelectMaxTopK || s.experts < topK || !s.logits || !s.ids || !s.weights)
    return cudaErrorInvalidValue;
  return dispatch(dtype, [&](auto t) -> cudaError_t {
    using T = decltype(t);
    constexpr int kTokensPerBlock = 8;
    const unsigned blocks = unsigned((tokens + kTokensPerBlock - 1) / kTokensPerBlock);
    return launchKernel(selectKernel<T>, dim3(blocks), dim3(kTokensPerBlock * 32), 0, stream, s,
                        tokens, int(topK));
  });
}

}  // namespace shardscope::kernels
