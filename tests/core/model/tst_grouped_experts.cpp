// GroupedExperts on the CPU: the expert-by-expert loop (the CPU's way, reading only the chosen
// experts' weights) and the padded batched matmuls both equal Hugging Face's expert loop computed
// in double, to fp32 (or bf16) rounding; Auto takes the loop on the CPU. Rows: a decode step's
// one token, few tokens leaving local experts without rows, a prefill's batch, expert-parallel
// ranks' shares, bf16, and a rank none of whose experts was chosen.
#include <ATen/ATen.h>
#include <QtTest>

#include "common/moe_reference.h"
#include "common/tensor_checks.h"
#include "core/model/layers/grouped_experts.h"

using namespace shardscope;

class TestGroupedExperts : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void equalsTheExpertLoop_data() {
    QTest::addColumn<int>("tokens");
    QTest::addColumn<int>("first");  // the rank's first expert
    QTest::addColumn<int>("local");  // its experts
    QTest::addColumn<int>("dtype");
    const int f32 = int(at::kFloat), bf16 = int(at::kBFloat16);
    QTest::newRow("T=1") << 1 << 0 << 16 << f32;
    QTest::newRow("T=3 (empty groups)") << 3 << 0 << 16 << f32;
    QTest::newRow("T=40") << 40 << 0 << 16 << f32;
    QTest::newRow("T=40 expert parallel, rank 2 of 4") << 40 << 8 << 4 << f32;
    QTest::newRow("T=1 expert parallel, rank 3 of 4") << 1 << 12 << 4 << f32;
    QTest::newRow("T=1 bf16") << 1 << 0 << 16 << bf16;
    QTest::newRow("T=40 bf16 expert parallel, rank 1 of 4") << 40 << 4 << 4 << bf16;
  }
  void equalsTheExpertLoop() {
    QFETCH(int, tokens);
    QFETCH(int, first);
    QFETCH(int, local);
    QFETCH(int, dtype);
    const auto type = at::ScalarType(dtype);
    at::manual_seed(uint64_t(11 + tokens + first));
    const int64_t E = 16, k = 4, H = 96, I = 40;
    const at::Tensor x = at::randn({tokens, H}).to(type);
    auto [w, ids] = at::softmax(at::randn({tokens, E}), -1).topk(k, -1);
    w = (w / w.sum(-1, true)).to(type);
    const at::Tensor w13 = (at::randn({local, 2 * I, H}) * 0.1).to(type),
                     w2 = (at::randn({local, H, I}) * 0.1).to(type);
    // Each row is meant to give this rank some of the choices (the last test has none).
    QVERIFY((ids.ge(first) & ids.lt(first + local)).any().item<bool>());
    // The truth from the same (rounded) inputs in double; bf16 rounds each product and sum too.
    const auto d = [](const at::Tensor& t) { return t.to(at::kDouble); };
    const at::Tensor truth = test::referenceMoe(d(x), d(w), ids, d(w13), d(w2), first);
    const double tolerance = type == at::kBFloat16 ? 2e-2 : 1e-5;

    const at::Tensor byExpert =
        groupedExperts(x, w, ids, w13, w2, first, E, ExpertGemm::ExpertByExpert);
    const at::Tensor padded = groupedExperts(x, w, ids, w13, w2, first, E, ExpertGemm::Padded);
    QCOMPARE(byExpert.sizes().vec(), x.sizes().vec());
    QCOMPARE(byExpert.scalar_type(), type);
    QVERIFY2(test::closeToScale(byExpert, truth, tolerance),
             test::closeToScaleMessage(byExpert, truth).c_str());
    QVERIFY2(test::closeToScale(padded, truth, tolerance),
             test::closeToScaleMessage(padded, truth).c_str());
    QVERIFY(at::equal(groupedExperts(x, w, ids, w13, w2, first, E), byExpert));  // Auto on the CPU
  }

  void aRankWithNoChosenExpertAddsNothing() {
    at::manual_seed(5);
    const int64_t E = 16, H = 32, I = 8;
    const at::Tensor x = at::randn({2, H});
    const at::Tensor ids = at::tensor({0, 1, 2, 3}, at::kLong).view({2, 2});
    const at::Tensor w = at::full({2, 2}, 0.5);
    const at::Tensor w13 = at::randn({4, 2 * I, H}), w2 = at::randn({4, H, I});
    for (ExpertGemm gemm : {ExpertGemm::ExpertByExpert, ExpertGemm::Padded}) {
      const at::Tensor y = groupedExperts(x, w, ids, w13, w2, /*first=*/8, E, gemm);
      QVERIFY(at::equal(y, at::zeros_like(x)));  // experts 8-11 hold no choice
    }
  }
};

QTEST_MAIN(TestGroupedExperts)
#include "tst_grouped_experts.moc"
