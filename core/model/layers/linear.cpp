#include "linear.h"

#ifdef SHARDSCOPE_WITH_CUDA_KERNELS
#include "../../kernels/fused_ops.h"
#endif

namespace shardscope {

at::Tensor linearForward(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
#ifdef SHARDSCOPE_WITH_CUDA_KERNELS
  if (at::Tensor y = fused::gemv(x, weight, bias); y.defined()) return y;
#endif
  if (!bias.defined()) return at::matmul(x, weight.t());
  if (x.dim() == 2) return at::addmm(bias, x, weight.t());
  return at::matmul(x, weight.t()) + bias;
}

}  // namespace shardscope
