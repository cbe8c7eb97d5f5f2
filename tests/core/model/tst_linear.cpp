// linearForward on the CPU: one fp32 row goes through BLAS's GEMV (at::mv / at::addmv: the GEMM
// would first pack the whole weight), whatever the row's leading dimensions; 2 to 24 fp32 rows
// (8 when rows are shorter than 256) through the few-rows kernel, which reads the weight once;
// more rows and other dtypes stay LibTorch's matmul; all agree with the matmul to fp32 rounding.
// The kernel itself is checked against sums in double, whatever way its columns are split.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <QtTest>

#include <cmath>

#include "common/tensor_checks.h"
#include "core/kernels/cpu_few_rows_gemm.h"
#include "core/model/layers/linear.h"

namespace {

// The kernel on one thread, x's rows with stride ldx (>= k); columns split at `cuts`.
at::Tensor kernelProduct(const at::Tensor& x, int64_t k, const at::Tensor& w, const at::Tensor& b,
                         std::vector<int64_t> cuts = {}) {
  const int64_t rows = x.size(0), n = w.size(0);
  at::Tensor y = at::full({rows, n}, std::nanf(""));
  cuts.insert(cuts.begin(), 0);
  cuts.push_back(n);
  for (size_t i = 0; i + 1 < cuts.size(); ++i)
    shardscope::cpu::fewRowsGemm(x.data_ptr<float>(), rows, x.stride(0), k, w.data_ptr<float>(),
                                 b.defined() ? b.data_ptr<float>() : nullptr, y.data_ptr<float>(),
                                 n, cuts[i], cuts[i + 1]);
  return y;
}

// x w^T + b in double: the exact sums the kernel's fp32 rounds.
at::Tensor exactProduct(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
  at::Tensor y = at::matmul(x.to(at::kDouble), w.to(at::kDouble).t());
  return b.defined() ? y + b.to(at::kDouble) : y;
}

}  // namespace

using namespace shardscope;

class TestLinear : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void initTestCase() { at::manual_seed(3); }

  void oneRowIsAGemv_data() {
    QTest::addColumn<QList<int>>("shape");  // x's leading dimensions; the last is k
    QTest::addColumn<bool>("bias");
    QTest::newRow("[k]") << QList<int>{} << false;
    QTest::newRow("[1, k]") << QList<int>{1} << false;
    QTest::newRow("[1, 1, k]") << QList<int>{1, 1} << false;
    QTest::newRow("[1, k] with bias") << QList<int>{1} << true;
  }
  void oneRowIsAGemv() {
    QFETCH(QList<int>, shape);
    QFETCH(bool, bias);
    const int64_t n = 3000, k = 1024;
    std::vector<int64_t> sizes(shape.begin(), shape.end());
    sizes.push_back(k);
    const at::Tensor x = at::randn(sizes), w = at::randn({n, k});
    const at::Tensor b = bias ? at::randn({n}) : at::Tensor();
    const at::Tensor y = linearForward(x, w, b);
    std::vector<int64_t> out(shape.begin(), shape.end());
    out.push_back(n);
    QCOMPARE(y.sizes().vec(), out);
    const at::Tensor row = x.reshape({k});
    QVERIFY(at::equal(y.reshape({n}), bias ? at::addmv(b, w, row) : at::mv(w, row)));
    QVERIFY(
        test::closeToScale(y.reshape({n}), at::matmul(row, w.t()) + (bias ? b : at::zeros({n}))));
  }

  // The kernel: every row count it unrolls (1-4) and the passes of four past them, rows short
  // (one stream) and long (several streams, a tail of k % 8), a bias, x with a row stride wider
  // than k, and a column count that leaves a tail after the groups of weight rows.
  void kernelEqualsExactSums_data() {
    QTest::addColumn<int>("rows");
    QTest::addColumn<int>("k");
    QTest::addColumn<bool>("bias");
    for (int k : {32, 108, 1003})  // 108: one chunk of 8 past the groups of chunks, then a tail
      for (int rows : {1, 2, 3, 4, 5, 9, 24}) {
        const QByteArray name = QByteArray::number(rows) + " rows, k " + QByteArray::number(k);
        QTest::newRow(name.constData()) << rows << k << false;
        QTest::newRow((name + " with bias").constData()) << rows << k << true;
      }
  }
  void kernelEqualsExactSums() {
    if (!cpu::fewRowsGemmAvailable())
      QSKIP("this CPU has no AVX2 and FMA: the kernel does not run");
    QFETCH(int, rows);
    QFETCH(int, k);
    QFETCH(bool, bias);
    const int64_t n = 1001;
    const at::Tensor wide = at::randn({rows, k + 5});
    const at::Tensor x = wide.narrow(1, 0, k);  // rows k + 5 apart
    const at::Tensor w = at::randn({n, k}), b = bias ? at::randn({n}) : at::Tensor();
    const at::Tensor y = kernelProduct(x, k, w, b);
    QVERIFY2(test::closeToScale(y, exactProduct(x, w, b)),
             test::closeToScaleMessage(y, exactProduct(x, w, b)).c_str());
    // A column's sum does not depend on where the calls split the columns.
    QVERIFY(at::equal(kernelProduct(x, k, w, b, {1, 7, 500, 999}), y));
    // A call writes its own columns and no others.
    at::Tensor part = at::full({rows, n}, std::nanf(""));
    cpu::fewRowsGemm(x.data_ptr<float>(), rows, x.stride(0), k, w.data_ptr<float>(),
                     bias ? b.data_ptr<float>() : nullptr, part.data_ptr<float>(), n, 7, 500);
    QVERIFY(at::equal(part.narrow(1, 7, 493), y.narrow(1, 7, 493)));
    QVERIFY(part.narrow(1, 0, 7).isnan().all().item<bool>());
    QVERIFY(part.narrow(1, 500, n - 500).isnan().all().item<bool>());
  }

  // 2 to 24 fp32 rows (8 when a row has fewer than 256 values) take the kernel, whatever x's
  // leading dimensions, and its columns split over the threads give the one-thread result.
  void fewRowsTakeTheKernel_data() {
    QTest::addColumn<QList<int>>("shape");  // x's leading dimensions
    QTest::addColumn<int>("k");
    QTest::addColumn<bool>("bias");
    QTest::newRow("[2, k], k 256") << QList<int>{2} << 256 << false;
    QTest::newRow("[3, 4, k], k 256, bias") << QList<int>{3, 4} << 256 << true;
    QTest::newRow("[24, k], k 1024") << QList<int>{24} << 1024 << false;
    QTest::newRow("[8, k], k 64") << QList<int>{8} << 64 << false;
  }
  void fewRowsTakeTheKernel() {
    if (!cpu::fewRowsGemmAvailable())
      QSKIP("this CPU has no AVX2 and FMA: the kernel does not run");
    QFETCH(QList<int>, shape);
    QFETCH(int, k);
    QFETCH(bool, bias);
    std::vector<int64_t> sizes(shape.begin(), shape.end());
    sizes.push_back(k);
    const int64_t n = 3001;
    const at::Tensor x = at::randn(sizes), w = at::randn({n, k});
    const at::Tensor b = bias ? at::randn({n}) : at::Tensor();
    const int threads = at::get_num_threads();
    at::set_num_threads(2);
    const at::Tensor y = linearForward(x, w, b);
    at::set_num_threads(1);
    const at::Tensor alone = linearForward(x, w, b);
    at::set_num_threads(threads);
    std::vector<int64_t> out(sizes);
    out.back() = n;
    QCOMPARE(y.sizes().vec(), out);
    const at::Tensor flat = x.reshape({-1, k});
    QVERIFY(at::equal(y.reshape({-1, n}), kernelProduct(flat, k, w, b)));
    QVERIFY(at::equal(alone, y));
    QVERIFY2(test::closeToScale(y.reshape({-1, n}), exactProduct(flat, w, b)),
             test::closeToScaleMessage(y.reshape({-1, n}), exactProduct(flat, w, b)).c_str());
  }

  // Past the kernel's rows, and bf16, keep the matmul bit for bit.
  void otherShapesStayMatmul() {
    const at::Tensor w = at::randn({500, 256}), rows = at::randn({25, 256});
    QVERIFY(at::equal(linearForward(rows, w), at::matmul(rows, w.t())));
    const at::Tensor shortW = at::randn({500, 64}), shortRows = at::randn({9, 64});
    QVERIFY(at::equal(linearForward(shortRows, shortW), at::matmul(shortRows, shortW.t())));
    const at::Tensor wb = w.to(at::kBFloat16), xb = at::randn({3, 256}).to(at::kBFloat16);
    QVERIFY(at::equal(linearForward(xb, wb), at::matmul(xb, wb.t())));
  }

  // Inputs the kernel does not take go to LibTorch, which refuses or broadcasts them as before:
  // a weight whose width is not x's, a bias of another length, a bias of one value, a weight that
  // records gradients, and rows of no values.
  void otherInputsAreLibTorchs() {
    const at::Tensor x = at::randn({3, 256}), w = at::randn({500, 256});
    QVERIFY_THROWS_EXCEPTION(std::exception, linearForward(x, at::randn({500, 255})));
    QVERIFY_THROWS_EXCEPTION(std::exception, linearForward(x, w, at::randn({499})));
    const at::Tensor one = at::randn({1});
    QVERIFY(at::equal(linearForward(x, w, one), at::addmm(one, x, w.t())));
    const at::Tensor grad = w.clone().requires_grad_();
    const at::Tensor y = linearForward(x, grad);
    QVERIFY(y.requires_grad());
    QVERIFY(at::equal(y.detach(), at::matmul(x, w.t())));
    QVERIFY(at::equal(linearForward(at::randn({3, 0}), at::randn({5, 0})), at::zeros({3, 5})));
  }
};

QTEST_GUILESS_MAIN(TestLinear)
#include "tst_linear.moc"
