// What the CUDA kernel suites (tst_fused_ops, tst_moe_kernels) share: GPU tensor options, the
// comparison of a kernel's result with its ATen reference within the dtype's rounding, and the
// fp32 / bf16 data rows.
#pragma once

#include <ATen/ATen.h>
#include <QtTest>

#include <algorithm>

namespace shardscope::test {

inline at::TensorOptions gpu(at::ScalarType t) {
  return at::TensorOptions().dtype(t).device(at::kCUDA);
}

// Fused and reference agree within one step of the dtype's rounding (fp32: 1e-5) and, in bf16,
// are equal bit for bit in at least `exact` of the elements (in fp32 a different order of a sum
// changes last bits, so only the tolerance is asked there). `ofScale`, when given, also allows
// that fraction of the reference's largest magnitude: long sums whose terms cancel near zero.
inline void expectClose(const at::Tensor& fused, const at::Tensor& reference, double exact,
                        const char* what, double ofScale = 0) {
  QCOMPARE(fused.sizes().vec(), reference.sizes().vec());
  QCOMPARE(fused.scalar_type(), reference.scalar_type());
  at::Tensor a = fused.to(at::kFloat).cpu(), b = reference.to(at::kFloat).cpu();
  const bool bf16 = fused.scalar_type() == at::kBFloat16;
  const bool fp16 = fused.scalar_type() == at::kHalf;  // 11-bit mantissa: 2 ulp is 1/512
  const double rtol = bf16 ? 1.0 / 128 : fp16 ? 1.0 / 512 : 1e-5;
  const double scale = b.abs().max().item<double>();
  const double atol = std::max(bf16 || fp16 ? 1e-3 : 1e-6, ofScale * scale);
  const double worst = ((a - b).abs() - rtol * b.abs()).max().item<double>();
  const double same = a.eq(b).to(at::kFloat).mean().item<double>();
  qInfo("%s: %.4f of elements identical, worst excess %.3g (allowed %.3g, scale %.3g)", what, same,
        worst, atol, scale);
  QVERIFY2(worst <= atol, what);
  if (bf16) QVERIFY2(same >= exact, what);
}

inline void dtypeRows() {
  QTest::addColumn<int>("dtype");
  QTest::newRow("fp32") << int(at::kFloat);
  QTest::newRow("bf16") << int(at::kBFloat16);
}

}  // namespace shardscope::test
