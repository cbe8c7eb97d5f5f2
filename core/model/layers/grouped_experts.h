// GroupedExperts: the experts of a batch that the fused GPU kernels do not take (a GPU prefill;
// every batch on the CPU), tokens grouped by expert so that each local expert's weights are read
// once:
//   y_t = sum over t's chosen local experts e (in increasing e, each add rounded, as Hugging
//         Face's index_add_ over experts) of w_te * (silu(x_t G_e^T) * (x_t U_e^T)) D_e^T.
// Three ways to run the grouped matmuls:
//   Ragged  the grouped GEMM (LibTorch >= 2.9, at::_grouped_mm; Hopper's fast path): the (token,
//           choice) rows sorted by expert, each expert's rows multiplied by its weights, no
//           padding, no host read (the layer never waits for the GPU). bf16 on a GPU, H and I
//           multiples of 8 only.
//   Padded  every local expert's rows padded to the busiest expert's count, two batched
//           matmuls (any dtype and device; the padding costs FLOPs when routing is skewed, and
//           every local expert's weights are read, chosen or not; the counts are read on the
//           host to size the batch).
//   ExpertByExpert  the chosen local experts one after another, two matmuls each through
//           linearForward (one fp32 row on the CPU is a GEMV): only the chosen experts' weights
//           are read. The CPU's way: it has no launch cost to spread, and a decode step chooses
//           k of its experts.
#pragma once

#include <ATen/ATen.h>

namespace shardscope {

enum class ExpertGemm { Auto, Padded, ExpertByExpert };

// x [T, H]; weights [T, k] (x's dtype) and ids [T, k] int64 from the router; w13 [localE, 2I, H]
// ([gate | up] rows), w2 [localE, H, I] for experts [firstExpert, firstExpert + localE) of
// numExperts. Returns [T, H]: the local experts' share of y (others' experts add nothing).
// Auto runs Ragged where it applies, ExpertByExpert on the CPU, Padded elsewhere.
at::Tensor groupedExperts(const at::Tensor& x, const at::Tensor& weights, const at::Tensor& ids,
                          const at::Tensor& w13, const at::Tensor& w2, int64_t firstExpert,
                          int64_t numExperts, ExpertGemm gemm = ExpertGemm::Auto);

// Whether groupedExperts(..., Auto) takes the ragged grouped GEMM for x [T, H] and w2 [localE, H,
// I].
bool raggedExpertGemm(const at::Tensor& x, const at::Tensor& w2);

}  // namespace shardscope
