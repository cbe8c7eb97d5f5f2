#include "linear.h"

#include <vector>

#ifdef SHARDSCOPE_WITH_CUDA_KERNELS
#include "../../kernels/fused_ops.h"
#endif

namespace shardscope {

at::Tensor linearForward(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
#ifdef SHARDSCOPE_WITH_CUDA_KERNELS
  if (at::Tensor y = fused::gemv(x, weight, bias); y.defined()) return y;
#endif
  if (x.is_cpu() && x.scalar_type() == at::kFloat && x.dim() >= 1 && x.numel() == x.size(-1) &&
      weight.dim() == 2 && weight.is_contiguous() && weight.scalar_type() == at::kFloat) {
    const at::Tensor row = x.reshape({x.size(-1)});
    const at::Tensor y = bias.defined() ? at::addmv(bias, weight, row) : at::mv(weight, row);
    std::vector<int64_t> shape = x.sizes().vec();
    shape.back() = weight.size(0);
    return y.view(shape);
  }
  if (!bias.defined()) return at::matmul(x, weight.t());
  if (x.dim() == 2) return at::addmm(bias, x, weight.t());
  return at::matmul(x, weight.t()) + bias;
}

}  // namespace shardscope
