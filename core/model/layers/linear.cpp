#include "linear.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <vector>

#include "../../kernels/cpu_few_rows_gemm.h"

#ifdef SHARDSCOPE_WITH_CUDA_KERNELS
#include "../../kernels/fused_ops.h"
#endif

namespace shardscope {
namespace {

#ifdef _OPENMP
constexpr bool kParallelForHasThreads = true;
#else
constexpr bool kParallelForHasThreads = false;
#endif

std::vector<int64_t> outputShape(const at::Tensor& x, const at::Tensor& weight) {
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() = weight.size(0);
  return shape;
}

// The most rows the few-rows kernel beats SGEMM at, measured on the 2-core development VM against
// an LM head of 151936 rows (bench/RESULTS.md, "CPU prefill and batches: a few rows"): with rows
// of 256 to 2048 values it took 0.55-0.66x the GEMM's time at 24 rows of x but 0.83-0.99x at 32,
// too thin a margin to keep; with 32 values it lost past 12 rows (each output's sum across the
// lanes then costs as much as its loads).
int64_t fewRowsLimit(int64_t k) {
  return k < 256 ? 8 : 24;
}

// 2 to fewRowsLimit fp32 rows on a CPU with the few-rows kernel: the weight read once, the output
// columns split over the intra-op threads. Undefined where it does not apply.
at::Tensor fewRowsLinear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  const int64_t k = x.size(-1), rows = x.numel() / k, n = weight.size(0);
  if (rows < 2 || rows > fewRowsLimit(k) || weight.size(1) != k || !cpu::fewRowsGemmAvailable())
    return {};
  // Without OpenMP here parallel_for is one thread (core/CMakeLists.txt): against BLAS's threads
  // the kernel lost 4.6-10x on a 16-core CPU, so such a build takes it only on one thread.
  if (!kParallelForHasThreads && at::get_num_threads() > 1) return {};
  // The kernel records no autograd graph, and takes a bias only as n contiguous floats; anything
  // else is LibTorch's to broadcast or refuse.
  if (x.requires_grad() || weight.requires_grad()) return {};
  if (bias.defined() &&
      (!bias.is_cpu() || bias.scalar_type() != at::kFloat || !bias.is_contiguous() ||
       bias.dim() != 1 || bias.size(0) != n || bias.requires_grad()))
    return {};
  const at::Tensor x2 = x.reshape({rows, k}).contiguous();
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
  if (x.is_cpu() && x.scalar_type() == at::kFloat && x.dim() >= 1 && x.size(-1) > 0 &&
      weight.is_cpu() && weight.dim() == 2 && weight.is_contiguous() &&
      weight.scalar_type() == at::kFloat) {
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
