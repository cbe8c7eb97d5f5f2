#include "linear.h"

#include <ATen/Parallel.h>

#include <vector>

#include "../../kernels/cpu_few_rows_gemm.h"

#ifdef SHARDSCOPE_WITH_CUDA_KERNELS
#include "../../kernels/fused_ops.h"
#endif

namespace shardscope {
namespace {

std::vector<int64_t> outputShape(const at::Tensor& x, const at::Tensor& weight) {
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() = weight.size(0);
  return shape;
}

// The most rows the few-rows kernel beats SGEMM at, measured on the 2-core development VM against
// an LM head of 151936 rows (bench/cpu_linear_bench): with rows of 256 to 2048 columns it was
// 0.55-0.66x the GEMM's time at 24 rows of x and 0.83-0.99x at 32; with 32 columns it lost past
// 12 (each output's sum of lanes then costs as much as its loads).
int64_t fewRowsLimit(int64_t k) {
  return k < 256 ? 8 : 24;
}

// 2 to fewRowsLimit fp32 rows on a CPU with the few-rows kernel: the weight read once, the output
// columns split over the intra-op threads. Undefined where it does not apply.
at::Tensor fewRowsLinear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  const int64_t k = x.size(-1), rows = k == 0 ? 0 : x.numel() / k;
  if (rows < 2 || rows > fewRowsLimit(k) || weight.size(1) != k || !cpu::fewRowsGemmAvailable())
    return {};
  if (bias.defined() && (!bias.is_cpu() || bias.scalar_type() != at::kFloat ||
                         !bias.is_contiguous() || bias.dim() != 1))
    return {};
  const at::Tensor x2 = x.reshape({rows, k}).contiguous();
  const int64_t n = weight.size(0);
  at::Tensor y = at::empty({rows, n}, x.options());
  const float* b = bias.defined() ? bias.data_ptr<float>() : nullptr;
  // At least about 256 KB of weight a task, so a thread's share is worth waking it for.
  const int64_t grain = std::max<int64_t>(1, (int64_t(1) << 16) / std::max<int64_t>(k, 1));
  at::parallel_for(0, n, grain, [&](int64_t n0, int64_t n1) {
    cpu::fewRowsGemm(x2.data_ptr<float>(), rows, k, k, weight.data_ptr<float>(), b,
                     y.data_ptr<float>(), n, n0, n1);
  });
  return y.view(outputShape(x, weight));
}

}  // namespace

at::Tensor linearForward(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
#ifdef SHARDSCOPE_WITH_CUDA_KERNELS
  if (at::Tensor y = fused::gemv(x, weight, bias); y.defined()) return y;
#endif
  if (x.is_cpu() && x.scalar_type() == at::kFloat && x.dim() >= 1 && weight.dim() == 2 &&
      weight.is_contiguous() && weight.scalar_type() == at::kFloat) {
    if (x.numel() == x.size(-1)) {
      const at::Tensor row = x.reshape({x.size(-1)});
      const at::Tensor y = bias.defined() ? at::addmv(bias, weight, row) : at::mv(weight, row);
      return y.view(outputShape(x, weight));
    }
    if (at::Tensor y = fewRowsLinear(x, weight, bias); y.defined()) return y;
  }
  if (!bias.defined()) return at::matmul(x, weight.t());
  if (x.dim() == 2) return at::addmm(bias, x, weight.t());
  return at::matmul(x, weight.t()) + bias;
}

}  // namespace shardscope
