#include "cpu_few_rows_gemm.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#if defined(__x86_64__)
#include <immintrin.h>
#define SHARDSCOPE_FEW_ROWS_AVX2 1
#else
#define SHARDSCOPE_FEW_ROWS_AVX2 0
#endif

namespace shardscope::cpu {

#if SHARDSCOPE_FEW_ROWS_AVX2
namespace {

// The functions below are compiled for AVX2 and FMA whatever the build's baseline; they run only
// where the CPU says it has both.
#define SHARDSCOPE_AVX2 __attribute__((target("avx2,fma")))

SHARDSCOPE_AVX2 inline float laneSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Every loop over R, W or U below is unrolled so that the sums stay in registers (-O2 keeps
// loops). At most 12 sums and 16 registers in all.

// Long weight rows: W rows at a time against all R rows of x, so each 8-float load of x serves W
// weight rows. The W rows are W short streams to the hardware prefetcher, so the next W rows are
// asked for while these are summed.
template <int R, int W>
SHARDSCOPE_AVX2 void longRows(const float* __restrict x, int64_t ldx, int64_t k,
                              const float* __restrict w, const float* __restrict bias,
                              float* __restrict y, int64_t ldy, int64_t n, bool prefetchNext) {
  const int64_t kv = k - k % 8;
  __m256 acc[W][R];
#pragma GCC unroll 8
  for (int i = 0; i < W; ++i)
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[i][r] = _mm256_setzero_ps();
  for (int64_t j = 0; j < kv; j += 8) {
    if (prefetchNext && j % 16 == 0) {
#pragma GCC unroll 8
      for (int i = 0; i < W; ++i) _mm_prefetch(w + (n + W + i) * k + j, _MM_HINT_T0);
    }
    __m256 wv[W];
#pragma GCC unroll 8
    for (int i = 0; i < W; ++i) wv[i] = _mm256_loadu_ps(w + (n + i) * k + j);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m256 xv = _mm256_loadu_ps(x + r * ldx + j);
#pragma GCC unroll 8
      for (int i = 0; i < W; ++i) acc[i][r] = _mm256_fmadd_ps(xv, wv[i], acc[i][r]);
    }
  }
  for (int i = 0; i < W; ++i) {
    const float* wn = w + (n + i) * k;
    for (int r = 0; r < R; ++r) {
      float s = laneSum(acc[i][r]);
      for (int64_t j = kv; j < k; ++j) s += x[r * ldx + j] * wn[j];
      y[r * ldy + n + i] = bias ? s + bias[n + i] : s;
    }
  }
}

// Short weight rows (a few cache lines each are too short a stream for the prefetcher to follow
// W of them): one row at a time, U chunks of 8 in flight, one sequential stream.
template <int R, int U>
SHARDSCOPE_AVX2 void shortRow(const float* __restrict x, int64_t ldx, int64_t k,
                              const float* __restrict w, const float* __restrict bias,
                              float* __restrict y, int64_t ldy, int64_t n) {
  const float* wn = w + n * k;
  __m256 acc[U][R];
#pragma GCC unroll 8
  for (int u = 0; u < U; ++u)
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[u][r] = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 8 * U <= k; j += 8 * U) {
#pragma GCC unroll 8
    for (int u = 0; u < U; ++u) {
      const __m256 wv = _mm256_loadu_ps(wn + j + 8 * u);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r)
        acc[u][r] = _mm256_fmadd_ps(_mm256_loadu_ps(x + r * ldx + j + 8 * u), wv, acc[u][r]);
    }
  }
  for (; j + 8 <= k; j += 8) {
    const __m256 wv = _mm256_loadu_ps(wn + j);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
      acc[0][r] = _mm256_fmadd_ps(_mm256_loadu_ps(x + r * ldx + j), wv, acc[0][r]);
  }
  for (int r = 0; r < R; ++r) {
    __m256 v = acc[0][r];
#pragma GCC unroll 8
    for (int u = 1; u < U; ++u) v = _mm256_add_ps(v, acc[u][r]);
    float s = laneSum(v);
    for (int64_t t = j; t < k; ++t) s += x[r * ldx + t] * wn[t];
    y[r * ldy + n] = bias ? s + bias[n] : s;
  }
}

// Below this many values a weight row is "short". Measured on the 2-core development VM with both
// shapes side by side (bench/RESULTS.md, "CPU prefill and batches: a few rows"): at k = 256 one
// stream took 0.65-0.87x the time of several; at k = 1024 and 2048 several (3 or 4) took
// 0.67-0.93x that of one. 512 itself was not measured.
constexpr int64_t kLongRow = 512;

template <int R>
SHARDSCOPE_AVX2 void rowsOfX(const float* x, int64_t ldx, int64_t k, const float* w,
                             const float* bias, float* y, int64_t ldy, int64_t n0, int64_t n1) {
  if (k < kLongRow) {
    constexpr int U = R <= 2 ? 4 : 2;
    for (int64_t n = n0; n < n1; ++n) shortRow<R, U>(x, ldx, k, w, bias, y, ldy, n);
    return;
  }
  constexpr int W = R <= 2 ? 4 : 3;
  int64_t n = n0;
  for (; n + W <= n1; n += W) longRows<R, W>(x, ldx, k, w, bias, y, ldy, n, n + 2 * W <= n1);
  for (; n < n1; ++n) longRows<R, 1>(x, ldx, k, w, bias, y, ldy, n, false);
}

void upToFourRows(const float* x, int64_t rows, int64_t ldx, int64_t k, const float* w,
                  const float* bias, float* y, int64_t ldy, int64_t n0, int64_t n1) {
  switch (rows) {
    case 1:
      return rowsOfX<1>(x, ldx, k, w, bias, y, ldy, n0, n1);
    case 2:
      return rowsOfX<2>(x, ldx, k, w, bias, y, ldy, n0, n1);
    case 3:
      return rowsOfX<3>(x, ldx, k, w, bias, y, ldy, n0, n1);
    case 4:
      return rowsOfX<4>(x, ldx, k, w, bias, y, ldy, n0, n1);
  }
}

#undef SHARDSCOPE_AVX2

}  // namespace

bool fewRowsGemmAvailable() {
  static const bool available = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return available;
}

void fewRowsGemm(const float* x, int64_t rows, int64_t ldx, int64_t k, const float* w,
                 const float* bias, float* y, int64_t ldy, int64_t n0, int64_t n1) {
  if (rows < 1)
    throw std::invalid_argument("fewRowsGemm: " + std::to_string(rows) +
                                " rows of x; it needs at least one");
  if (rows <= 4) return upToFourRows(x, rows, ldx, k, w, bias, y, ldy, n0, n1);
  // More rows do not fit the registers at once: four at a time over a block of weight rows small
  // enough (about 128 KB) to be read from L2 after the first four.
  const int64_t block = std::max<int64_t>(8, (int64_t(1) << 15) / std::max<int64_t>(k, 1));
  for (int64_t b0 = n0; b0 < n1; b0 += block) {
    const int64_t b1 = std::min(n1, b0 + block);
    for (int64_t r = 0; r < rows; r += 4)
      upToFourRows(x + r * ldx, std::min<int64_t>(4, rows - r), ldx, k, w, bias, y + r * ldy, ldy,
                   b0, b1);
  }
}

#else

bool fewRowsGemmAvailable() {
  return false;
}

void fewRowsGemm(const float*, int64_t, int64_t, int64_t, const float*, const float*, float*,
                 int64_t, int64_t, int64_t) {
  throw std::logic_error(
      "fewRowsGemm: this build has no few-rows kernel for its CPU; check fewRowsGemmAvailable() "
      "and use the GEMM");
}

#endif

}  // namespace shardscope::cpu
