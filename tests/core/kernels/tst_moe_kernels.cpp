// The MoE CUDA kernels (core/kernels: expert selection, the fused and grouped expert kernels, the
// combine) against Hugging Face's expert loop and FusedMoE's ATen routing chain: fp32 and bf16,
// decode and prefill token counts, all experts local or an expert-parallel rank's share. Built only
// with the kernels; skips without a GPU.
#include <QtTest>

#include <cmath>

#include "common/kernel_checks.h"
#include "common/moe_reference.h"
#include "core/kernels/fused_ops.h"
#include "core/model/layers/grouped_experts.h"

using namespace shardscope;
using test::dtypeRows;
using test::expectClose;
using test::gpu;
using test::referenceMoe;

namespace {

// FusedMoE::selectExperts' ATen chain (Hugging Face's order of ops).
std::pair<at::Tensor, at::Tensor> referenceSelect(const at::Tensor& logits,
                                                  const fused::MoeRouting& r) {
  auto [w, ids] = at::softmax(logits, -1, at::kFloat).topk(r.topK, -1);
  if (r.normTopkProb) w = w / w.sum(-1, true);
  if (r.scale != 1.0) w = w * r.scale;
  return {w.to(logits.scalar_type()), ids};
}

// Router logits with no two experts of a token equal (so the top k is one set in any dtype): a
// permutation of evenly spaced values per token, in bf16's range of exact steps.
at::Tensor distinctLogits(int64_t T, int64_t E, at::TensorOptions o) {
  std::vector<at::Tensor> rows;
  for (int64_t t = 0; t < T; ++t)
    rows.push_back((at::randperm(E, o.dtype(at::kLong)) - E / 2).to(at::kFloat) * 0.04);
  return at::stack(rows).to(o.dtype());
}

}  // namespace

class TestMoeKernels : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() {
    if (!at::hasCUDA()) QSKIP("no CUDA device: the MoE kernels run on the GPU only");
    at::manual_seed(7);
  }

  // The MoE kernels against the expert loop: a decode token, a few, a batch of 16 and a graph-sized
  // prefill of 256 tokens, all experts local (the default layout) or a quarter of them (expert
  // parallel at tp=4, rank 1); and widths that the one-token kernels' groups of rows a warp do not
  // divide (intermediate 104: a warp's last rows past the end).
  void fusedMoe_data() {
    QTest::addColumn<int>("dtype");
    QTest::addColumn<int>("tokens");
    QTest::addColumn<bool>("expertParallel");
    QTest::addColumn<int>("hidden");
    QTest::addColumn<int>("inter");
    for (int t : {int(at::kFloat), int(at::kBFloat16)}) {
      const std::string d = t == int(at::kFloat) ? "fp32" : "bf16";
      for (int T : {1, 3, 16, 256}) {
        for (bool ep : {false, true}) {
          const std::string name = d + " T=" + std::to_string(T) + (ep ? " ep" : "");
          QTest::newRow(name.c_str()) << t << T << ep << 256 << 96;
        }
      }
      QTest::newRow((d + " T=3 H=264 I=104").c_str()) << t << 3 << false << 264 << 104;
    }
  }
  void fusedMoe() {
    QFETCH(int, dtype);
    QFETCH(int, tokens);
    QFETCH(bool, expertParallel);
    QFETCH(int, hidden);
    QFETCH(int, inter);
    const auto o = gpu(at::ScalarType(dtype));
    at::manual_seed(uint64_t(1000 * tokens + 10 * hidden + (expertParallel ? 1 : 0)));
    const int64_t E = 16, k = 4, H = hidden, I = inter;
    const int64_t local = expertParallel ? E / 4 : E, first = expertParallel ? local : 0;
    at::Tensor x = at::randn({tokens, H}, o);
    at::Tensor probs = at::softmax(at::randn({tokens, E}, o), -1, at::kFloat);
    auto [w, ids] = probs.topk(k, -1);
    w = (w / w.sum(-1, true)).to(o.dtype());
    at::Tensor w13 = at::randn({local, 2 * I, H}, o) * 0.05,
               w2 = at::randn({local, H, I}, o) * 0.05;
    const at::Tensor fused = fused::fusedMoe(x, w, ids, w13, w2, first);
    QVERIFY(fused.defined());
    expectClose(fused, referenceMoe(x, w, ids, w13, w2, first), 0.3, "fused_moe");
    // A token alone (the one-token kernels, several rows a warp) equals its row of the batch (the
    // batch kernels): every sum is added in the same order by both.
    for (int64_t t = 0; t < std::min<int64_t>(tokens, 3); ++t) {
      const at::Tensor alone = fused::fusedMoe(x.narrow(0, t, 1), w.narrow(0, t, 1),
                                               ids.narrow(0, t, 1), w13, w2, first);
      QVERIFY(alone.defined());
      QVERIFY2(at::equal(alone, fused.narrow(0, t, 1)), "a token alone differs from its batch row");
    }
  }

  // A prefill's experts (GroupedExperts): Hopper's ragged grouped GEMM (bf16, LibTorch >= 2.9)
  // against the reference loop over experts and the padded batched matmuls; few tokens leave
  // some local experts without rows (empty groups), expert parallel leaves others' experts out.
  void groupedExperts_data() {
    QTest::addColumn<int>("tokens");
    QTest::addColumn<bool>("expertParallel");
    QTest::newRow("T=600") << 600 << false;
    QTest::newRow("T=600 ep") << 600 << true;
    QTest::newRow("T=5 ep (empty groups)") << 5 << true;
    QTest::newRow("T=2 (empty groups)") << 2 << false;
  }
  void groupedExperts() {
    QFETCH(int, tokens);
    QFETCH(bool, expertParallel);
    const auto o = gpu(at::kBFloat16);
    at::manual_seed(uint64_t(77 + tokens + (expertParallel ? 1 : 0)));
    const int64_t E = 16, k = 4, H = 256, I = 96;
    const int64_t local = expertParallel ? E / 4 : E, first = expertParallel ? local : 0;
    at::Tensor x = at::randn({tokens, H}, o);
    auto [w, ids] = at::softmax(at::randn({tokens, E}, o), -1, at::kFloat).topk(k, -1);
    w = (w / w.sum(-1, true)).to(o.dtype());
    at::Tensor w13 = at::randn({local, 2 * I, H}, o) * 0.05,
               w2 = at::randn({local, H, I}, o) * 0.05;
    // Rows that are not 16-byte multiples (H or I not a multiple of 8) take the padded path.
    QVERIFY(!raggedExpertGemm(x.narrow(1, 0, H - 4), w2));
    QVERIFY(!raggedExpertGemm(x, w2.narrow(2, 0, I - 4)));
    if (!raggedExpertGemm(x, w2))
      QSKIP("LibTorch before 2.9 has no grouped GEMM for every GPU: the padded path runs");
    const at::Tensor ragged = shardscope::groupedExperts(x, w, ids, w13, w2, first, E);
    const at::Tensor padded =
        shardscope::groupedExperts(x, w, ids, w13, w2, first, E, ExpertGemm::Padded);
    expectClose(ragged, referenceMoe(x, w, ids, w13, w2, first), 0.3, "ragged");
    expectClose(ragged, padded, 0.3, "ragged against padded");
  }

  // A prefill's expert outputs combined per token in one kernel, bit for bit GroupedExperts' ATen
  // chain: products rounded, index_copy into zeros (another rank's experts stay zero rows), the
  // choices gathered in increasing expert order, k - 1 rounded adds.
  void moeCombine_data() {
    QTest::addColumn<int>("dtype");
    QTest::addColumn<int>("hidden");
    QTest::addColumn<bool>("expertParallel");
    for (int t : {int(at::kFloat), int(at::kBFloat16), int(at::kHalf)}) {
      const std::string d = c10::toString(at::ScalarType(t));
      for (int H : {2048, 100}) {
        QTest::newRow((d + " H=" + std::to_string(H)).c_str()) << t << H << false;
        QTest::newRow((d + " H=" + std::to_string(H) + " ep").c_str()) << t << H << true;
      }
    }
  }
  void moeCombine() {
    QFETCH(int, dtype);
    QFETCH(int, hidden);
    QFETCH(bool, expertParallel);
    const auto o = gpu(at::ScalarType(dtype));
    const int64_t T = 300, E = 16, k = 4, H = hidden;
    auto [w, ids] = at::softmax(at::randn({T, E}, o.dtype(at::kFloat)), -1).topk(k, -1);
    w = w.to(o.dtype());
    // The local pairs sorted by expert (experts 4..11 under expert parallelism), as GroupedExperts
    // orders them, each with its expert's output row.
    const at::Tensor flat = ids.reshape(-1);
    at::Tensor order = std::get<1>(flat.sort(c10::optional<bool>(true), 0));
    if (expertParallel) {
      const at::Tensor sortedIds = flat.index_select(0, order);
      order = order.index({sortedIds.ge(4) & sortedIds.lt(12)});
    }
    const at::Tensor down = at::randn({order.size(0), H}, o) * 2;
    at::Tensor rowOf = at::full({T * k}, -1, ids.options());
    rowOf.index_copy_(0, order, at::arange(order.size(0), ids.options()));
    const at::Tensor y = fused::moeCombine(down, rowOf, w, ids);
    QVERIFY(y.defined());
    at::Tensor perPair = at::zeros({T * k, H}, o);
    perPair.index_copy_(0, order, down * w.reshape(-1).index_select(0, order).unsqueeze(1));
    const at::Tensor byExpert = std::get<1>(ids.sort(1));
    const at::Tensor ordered =
        perPair.view({T, k, H}).gather(1, byExpert.unsqueeze(-1).expand({T, k, H}));
    at::Tensor reference = ordered.select(1, 0).clone();
    for (int64_t j = 1; j < k; ++j) reference.add_(ordered.select(1, j));
    QVERIFY(at::equal(y, reference));
  }

  // The router's choice in one kernel against the ATen chain: the same experts in the same order
  // (the probabilities at the chosen ids equal ATen's top k bit for bit, so ties could only
  // swap equal values) and weights within the rounding (bf16: at least 99 % identical).
  void moeSelect_data() {
    QTest::addColumn<int>("dtype");
    QTest::addColumn<int>("tokens");
    QTest::addColumn<int>("experts");
    QTest::addColumn<int>("topK");
    QTest::addColumn<bool>("norm");
    QTest::addColumn<double>("scale");
    for (int t : {int(at::kFloat), int(at::kBFloat16)}) {
      const char* d = t == int(at::kFloat) ? "fp32" : "bf16";
      QTest::addRow("%s qwen3 T=1", d) << t << 1 << 128 << 8 << true << 1.0;
      QTest::addRow("%s qwen3 T=300", d) << t << 300 << 128 << 8 << true << 1.0;
      QTest::addRow("%s deepseek T=16", d) << t << 16 << 64 << 6 << false << 1.0;
      QTest::addRow("%s scaled E=60 T=7", d) << t << 7 << 60 << 4 << true << 2.5;
      // More experts than the choice keeps in registers (256): p recomputed every round.
      QTest::addRow("%s many experts E=300 T=5", d) << t << 5 << 300 << 8 << true << 1.0;
    }
  }
  void moeSelect() {
    QFETCH(int, dtype);
    QFETCH(int, tokens);
    QFETCH(int, experts);
    QFETCH(int, topK);
    QFETCH(bool, norm);
    QFETCH(double, scale);
    const auto o = gpu(at::ScalarType(dtype));
    const fused::MoeRouting r{topK, norm, scale};
    const at::Tensor logits = at::randn({tokens, experts}, o) * 2;
    auto [w, ids] = fused::moeSelect(logits, r);
    QVERIFY(w.defined() && ids.defined());
    QCOMPARE(ids.scalar_type(), at::kLong);
    auto [refW, refIds] = referenceSelect(logits, r);
    const at::Tensor probs = at::softmax(logits, -1, at::kFloat);
    const at::Tensor refP = probs.gather(1, refIds);
    QVERIFY2(at::equal(probs.gather(1, ids), refP), "the chosen probabilities differ from ATen's");
    const at::Tensor sortedIds = std::get<0>(ids.sort(1));
    QVERIFY2(
        (sortedIds.narrow(1, 1, topK - 1) != sortedIds.narrow(1, 0, topK - 1)).all().item<bool>(),
        "an expert chosen twice");
    // In order of choice: equal probabilities (a tie ordered either way) give equal weights.
    expectClose(w, refW, 0.99, "moe_select");
  }

  // The experts from the router logits (the choice inside the first kernel; logits with no ties,
  // so ATen's choice is the same set) against the ATen choice and the expert loop, and for a
  // decode step from the router's weight (its GEMV there too) against the GEMV kernel's logits;
  // twice, bit-identical (the down kernel's last block adds in a fixed order), and the router's
  // block count back at zero.
  // One token takes the one-token kernels (each block chooses from the logits, down adds its rows'
  // experts in the block); they must equal the general kernels given the same choice, bit for
  // bit: the Qwen3-30B-A3B routing shape (128 experts, top 8) and more choices than a block has
  // warps (top 12) are rows of their own, and so are Qwen3-30B-A3B's sizes (hidden 2048,
  // intermediate 768).
  void fusedMoeFromRouter_data() {
    QTest::addColumn<int>("dtype");
    QTest::addColumn<int>("tokens");
    QTest::addColumn<bool>("expertParallel");
    QTest::addColumn<int>("experts");
    QTest::addColumn<int>("topK");
    QTest::addColumn<int>("hidden");
    QTest::addColumn<int>("inter");
    QTest::addColumn<double>("ofScale");  // expectClose's allowance of the outputs' scale
    for (int t : {int(at::kFloat), int(at::kBFloat16)}) {
      const char* d = t == int(at::kFloat) ? "fp32" : "bf16";
      for (int T : {1, 4, 16, 256}) {
        for (bool ep : {false, true})
          QTest::addRow("%s T=%d%s", d, T, ep ? " ep" : "")
              << t << T << ep << 32 << 4 << 256 << 96 << 0.0;
      }
      QTest::addRow("%s T=1 E=128 k=8", d) << t << 1 << false << 128 << 8 << 256 << 96 << 0.0;
      QTest::addRow("%s T=1 E=64 k=12 ep", d) << t << 1 << true << 64 << 12 << 256 << 96 << 0.0;
      // An expert count that is not a multiple of four: the block's ranking reads keys by fours.
      QTest::addRow("%s T=1 E=61 k=5", d) << t << 1 << false << 61 << 5 << 256 << 96 << 0.0;
      // A row of 264 elements (a lane's last piece past the end); fewer units than blocks.
      QTest::addRow("%s T=1 E=32 k=4 H=264 I=104", d)
          << t << 1 << false << 32 << 4 << 264 << 104 << 0.0;
      QTest::addRow("%s T=1 E=32 k=2 H=64 I=8 ep", d)
          << t << 1 << true << 32 << 2 << 64 << 8 << 0.0;
      // Outputs that sum 2048 and then 768 products cancel near zero by more than the dtype's
      // absolute allowance (fp32 1e-6, bf16 1e-3): a fraction of their scale instead.
      QTest::addRow("%s T=1 E=128 k=8 H=2048 I=768", d)
          << t << 1 << false << 128 << 8 << 2048 << 768
          << (t == int(at::kFloat) ? 1e-6 : 1.0 / 256);
      // Rows of 8 KB: in bf16 gate_up's ring has its fewest slots (8), each used about 6 times,
      // down's 8 slots about 8 times.
      QTest::addRow("%s T=1 E=16 k=8 H=4096 I=768", d)
          << t << 1 << false << 16 << 8 << 4096 << 768 << (t == int(at::kFloat) ? 1e-6 : 1.0 / 256);
      // Expert counts other than a power of two: 61 leaves three of the router's last block's
      // eight warps without an expert; 96 at hidden 264, a row of one round of the warp's 16-byte
      // loads and 8 elements more.
      QTest::addRow("%s T=1 E=61 k=5 I=192", d) << t << 1 << false << 61 << 5 << 256 << 192 << 0.0;
      QTest::addRow("%s T=1 E=96 k=6 H=264 I=384", d)
          << t << 1 << false << 96 << 6 << 264 << 384 << 0.0;
    }
  }
  void fusedMoeFromRouter() {
    QFETCH(int, dtype);
    QFETCH(int, tokens);
    QFETCH(bool, expertParallel);
    QFETCH(int, experts);
    QFETCH(int, topK);
    QFETCH(int, hidden);
    QFETCH(int, inter);
    QFETCH(double, ofScale);
    const auto o = gpu(at::ScalarType(dtype));
    const int64_t E = experts, k = topK, H = hidden, I = inter;
    const int64_t local = expertParallel ? E / 4 : E, first = expertParallel ? local : 0;
    const fused::MoeRouting r{k, true, 1.0};
    at::Tensor x = at::randn({tokens, H}, o);
    at::Tensor w13 = at::randn({local, 2 * I, H}, o) * 0.05,
               w2 = at::randn({local, H, I}, o) * 0.05;
    const at::Tensor logits = distinctLogits(tokens, E, o);
    auto [refW, refIds] = referenceSelect(logits, r);
    const at::Tensor reference = referenceMoe(x, refW, refIds, w13, w2, first);
    const at::Tensor fromLogits = fused::fusedMoe(x, logits, r, w13, w2, first);
    QVERIFY(fromLogits.defined());
    expectClose(fromLogits, reference, 0.3, "fused_moe from logits", ofScale);
    QVERIFY2(at::equal(fromLogits, fused::fusedMoe(x, logits, r, w13, w2, first)),
             "two runs differ");
    auto [sw, sids] = fused::moeSelect(logits, r);
    QVERIFY2(at::equal(fromLogits, fused::fusedMoe(x, sw, sids, w13, w2, first)),
             "the experts chosen in the expert kernels differ from the routing kernel's lists");
    const at::Tensor done = at::zeros({1}, o.dtype(at::kInt));
    const at::Tensor routerW = at::randn({E, H}, o) * 0.1;
    const at::Tensor fromWeight = fused::fusedMoe(x, routerW, done, r, w13, w2, first);
    if (tokens > 4) {
      QVERIFY(!fromWeight.defined());  // a prefill: the router runs as its own GEMM
      return;
    }
    QVERIFY(fromWeight.defined());
    const at::Tensor gemvLogits = fused::gemv(x, routerW);
    QVERIFY(gemvLogits.defined());
    auto [gw, gids] = fused::moeSelect(gemvLogits, r);  // its ties as the kernel breaks them
    expectClose(fromWeight, referenceMoe(x, gw, gids, w13, w2, first), 0.3, "fused_moe with router",
                ofScale);
    QVERIFY2(at::equal(fromWeight, fused::fusedMoe(x, gemvLogits, r, w13, w2, first)),
             "the router's GEMV inside the kernel differs from the GEMV kernel");
    QVERIFY2(at::equal(fromWeight, fused::fusedMoe(x, gw, gids, w13, w2, first)),
             "the router call differs from the expert kernels given its choice");
    QVERIFY2(at::equal(fromWeight, fused::fusedMoe(x, routerW, done, r, w13, w2, first)),
             "two runs differ");
    QCOMPARE(done.item<int>(), 0);

    // The post-attention norm folded into the router's kernel: y and x + residual equal
    // addRmsNorm followed by the call above, bit for bit; without a residual, rmsNorm's.
    const at::Tensor h = at::randn({tokens, H}, o), residual = at::randn({tokens, H}, o);
    const at::Tensor normW = at::rand({H}, o) + 0.5;
    auto [normed, sum] = fused::addRmsNorm(h, residual, normW, 1e-6);
    QVERIFY(normed.defined());
    fused::NormIn norm{residual, normW, 1e-6};
    auto [y, r2] = fused::fusedMoeAfterNorm(h, norm, routerW, done, r, w13, w2, first);
    QVERIFY(y.defined());
    QVERIFY2(at::equal(r2, sum), "x + residual differs from addRmsNorm's");
    QVERIFY2(at::equal(y, fused::fusedMoe(normed, routerW, done, r, w13, w2, first)),
             "the norm inside the router's kernel differs from addRmsNorm before it");
    norm.residual = at::Tensor();
    auto [yAlone, same] = fused::fusedMoeAfterNorm(h, norm, routerW, done, r, w13, w2, first);
    QVERIFY(yAlone.defined() && same.is_same(h));
    QVERIFY2(at::equal(yAlone, fused::fusedMoe(fused::rmsNorm(h, normW, 1e-6), routerW, done, r,
                                               w13, w2, first)),
             "the norm without a residual differs from rmsNorm");
    QCOMPARE(done.item<int>(), 0);
    // Rows past the router kernel's shared memory are left to the norm and the call above.
    const at::Tensor wide = at::randn({4, 8192}, o);
    const fused::NormIn wideNorm{at::Tensor(), at::rand({8192}, o), 1e-6};
    QVERIFY(!fused::fusedMoeAfterNorm(wide, wideNorm, at::randn({E, 8192}, o), done, r,
                                      at::randn({local, 2 * I, 8192}, o),
                                      at::randn({local, 8192, I}, o), first)
                 .first.defined());
  }

  // Equal logits (many experts tie at the boundary of the top k): the one-token kernels rank the
  // experts in parallel, the routing kernel takes k rounds of an arg-max; both put the lower
  // expert first among equal probabilities, so the outputs are the same bits.
  void oneTokenExpertsBreakTiesAsTheRoutingKernel_data() {
    QTest::addColumn<int>("dtype");
    QTest::addColumn<bool>("expertParallel");
    for (int t : {int(at::kFloat), int(at::kBFloat16)}) {
      for (bool ep : {false, true})
        QTest::addRow("%s%s", t == int(at::kFloat) ? "fp32" : "bf16", ep ? " ep" : "") << t << ep;
    }
  }
  void oneTokenExpertsBreakTiesAsTheRoutingKernel() {
    QFETCH(int, dtype);
    QFETCH(bool, expertParallel);
    const auto o = gpu(at::ScalarType(dtype));
    at::manual_seed(expertParallel ? 31 : 30);
    const int64_t E = 128, k = 8, H = 256, I = 96;
    const int64_t local = expertParallel ? E / 4 : E, first = expertParallel ? local : 0;
    const fused::MoeRouting r{k, true, 1.0};
    const at::Tensor x = at::randn({1, H}, o);
    const at::Tensor w13 = at::randn({local, 2 * I, H}, o) * 0.05,
                     w2 = at::randn({local, H, I}, o) * 0.05;
    // Five distinct values over 128 experts: about 25 experts share the largest.
    const at::Tensor logits = (at::randint(0, 5, {1, E}, o.dtype(at::kLong)) * 0.5).to(o.dtype());
    auto [w, ids] = fused::moeSelect(logits, r);
    QVERIFY(w.defined());
    const at::Tensor oneToken = fused::fusedMoe(x, logits, r, w13, w2, first);
    QVERIFY(oneToken.defined());
    QVERIFY2(at::equal(oneToken, fused::fusedMoe(x, w, ids, w13, w2, first)),
             "the one-token kernels broke a tie otherwise than the routing kernel");
  }
};

QTEST_GUILESS_MAIN(TestMoeKernels)
#include "tst_moe_kernels.moc"
