// linearForward: y = x w^T + b, the one matmul every linear layer (and the LM head) runs. A decode
// step's few rows on the GPU go to the GEMV kernel (core/kernels), which streams the weight at
// close to copy bandwidth; one fp32 row on the CPU goes to BLAS's GEMV, whose GEMM would first
// pack the whole weight (bench/RESULTS.md, "CPU decode: one row through GEMV"), and 2 to 24 fp32
// rows (8 when a row has fewer than 256 values) to the few-rows kernel on CPUs with AVX2 and FMA
// (core/kernels/cpu_few_rows_gemm.h), which reads the weight once; everything else is
// LibTorch's matmul.
#pragma once

#include <ATen/ATen.h>

namespace shardscope {

at::Tensor linearForward(const at::Tensor& x, const at::Tensor& weight,
                         const at::Tensor& bias = {});

}  // namespace shardscope
