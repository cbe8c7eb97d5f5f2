// linearForward on the CPU: one fp32 row goes through BLAS's GEMV (at::mv / at::addmv: the GEMM
// would first pack the whole weight), whatever the row's leading dimensions; several rows and
// other dtypes stay LibTorch's matmul; both agree with the matmul to fp32 rounding.
#include <ATen/ATen.h>
#include <QtTest>

#include "common/tensor_checks.h"
#include "core/model/layers/linear.h"

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

  // Rows of more than one, and one bf16 row, keep the matmul.
  void otherShapesStayMatmul() {
    const at::Tensor w = at::randn({500, 256});
    const at::Tensor rows = at::randn({3, 256});
    QVERIFY(at::equal(linearForward(rows, w), at::matmul(rows, w.t())));
    const at::Tensor wb = w.to(at::kBFloat16), xb = at::randn({1, 256}).to(at::kBFloat16);
    QVERIFY(at::equal(linearForward(xb, wb), at::matmul(xb, wb.t())));
  }
};

QTEST_GUILESS_MAIN(TestLinear)
#include "tst_linear.moc"
