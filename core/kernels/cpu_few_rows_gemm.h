// cpu_few_rows_gemm: y = x w^T + b for a few fp32 rows of x on the CPU, each weight row read once.
// BLAS's SGEMM first packs the whole weight into panels, and for 2-16 rows took 3.4-5.7x the time
// of reading the weight (bench/RESULTS.md, "CPU prefill and batches: a few rows"); here each weight
// row is loaded once for up to four rows of x (more rows take turns over a block of the weight
// held in L2). No LibTorch header: plain pointers in, so the caller chooses the threads. The sums
// run in 8-lane partial sums, then the lanes, then the tail: not BLAS's order, so results equal
// the GEMM to fp32 rounding, not bit for bit (the same on every run of one machine). One output
// column does not depend on how the columns are split over threads; with rows of fewer than 512
// values its bits can depend on how many rows of x share the call (their chunks of 8 are summed
// 4 or 2 at a time).
#pragma once

#include <cstdint>

namespace shardscope::cpu {

// Whether this CPU runs the kernel (x86-64 with AVX2 and FMA); elsewhere callers keep their GEMM.
bool fewRowsGemmAvailable();

// Output columns [n0, n1) of y[r, n] = sum_j x[r, j] w[n, j] (+ bias[n] when bias is not null),
// for rows >= 1. x is [rows, k] with row stride ldx, w is [N, k] contiguous, y is
// [rows, N] with row stride ldy. Call only where fewRowsGemmAvailable().
void fewRowsGemm(const float* x, int64_t rows, int64_t ldx, int64_t k, const float* w,
                 const float* bias, float* y, int64_t ldy, int64_t n0, int64_t n1);

}  // namespace shardscope::cpu
