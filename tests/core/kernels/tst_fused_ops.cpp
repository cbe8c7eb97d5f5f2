// The fused CUDA kernels (core/kernels) against the ATen chains they replace, written as Hugging
// Face's modules compute them: fp32 and bf16 (fp16 too for the fused GEMV), vectorised and scalar
// row widths, q/k heads read in place from a fused qkv row. Built only with the kernels; skips
// without a GPU.
#include <QtTest>

#include <cmath>

#include "common/tensor_checks.h"
#include "core/kernels/fused_ops.h"
#include "core/model/layers/grouped_experts.h"

using namespace shardscope;

namespace {

at::TensorOptions gpu(at::ScalarType t) {
  return at::TensorOptions().dtype(t).device(at::kCUDA);
}

// HF's RMSNorm: fp32 inside, rounded to the input dtype before the weight.
at::Tensor referenceNorm(const at::Tensor& x, const at::Tensor& w, double eps) {
  at::Tensor xf = x.to(at::kFloat);
  at::Tensor var = xf.pow(2).mean(-1, true);
  return w * (xf * at::rsqrt(var + eps)).to(x.scalar_type());
}

// HF's apply_rotary_pos_emb with cos/sin [T, d/2] already at the positions.
at::Tensor referenceRotary(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin,
                           int64_t d) {
  const int64_t T = x.size(0);
  at::Tensor h = x.reshape({T, -1, d});
  at::Tensor c = at::cat({cos, cos}, -1).unsqueeze(1), s = at::cat({sin, sin}, -1).unsqueeze(1);
  at::Tensor rotated = at::cat({-h.narrow(-1, d / 2, d / 2), h.narrow(-1, 0, d / 2)}, -1);
  return (h * c + rotated * s).reshape({T, -1});
}

// Fused and reference agree within one step of the dtype's rounding (fp32: 1e-5) and, in bf16,
// are equal bit for bit in at least `exact` of the elements (in fp32 a different order of a sum
// changes last bits, so only the tolerance is asked there).
void expectClose(const at::Tensor& fused, const at::Tensor& reference, double exact,
                 const char* what) {
  QCOMPARE(fused.sizes().vec(), reference.sizes().vec());
  QCOMPARE(fused.scalar_type(), reference.scalar_type());
  at::Tensor a = fused.to(at::kFloat).cpu(), b = reference.to(at::kFloat).cpu();
  const bool bf16 = fused.scalar_type() == at::kBFloat16;
  const bool fp16 = fused.scalar_type() == at::kHalf;  // 11-bit mantissa: 2 ulp is 1/512
  const double rtol = bf16 ? 1.0 / 128 : fp16 ? 1.0 / 512 : 1e-5;
  const double scale = b.abs().max().item<double>();
  const double atol = bf16 || fp16 ? 1e-3 : 1e-6;
  const double worst = ((a - b).abs() - rtol * b.abs()).max().item<double>();
  const double same = a.eq(b).to(at::kFloat).mean().item<double>();
  qInfo("%s: %.4f of elements identical, worst excess %.3g (allowed %.3g, scale %.3g)", what, same,
        worst, atol, scale);
  QVERIFY2(worst <= atol, what);
  if (bf16) QVERIFY2(same >= exact, what);
}

void dtypeRows() {
  QTest::addColumn<int>("dtype");
  QTest::newRow("fp32") << int(at::kFloat);
  QTest::newRow("bf16") << int(at::kBFloat16);
}

// Hugging Face's expert loop (Qwen3MoeExperts): experts in increasing order, each chosen one's
// SwiGLU on its tokens, scaled by the routing weight and index_add_-ed into zeros; only experts
// [first, first + w13.size(0)) count (a rank's share under expert parallelism).
at::Tensor referenceMoe(const at::Tensor& x, const at::Tensor& weights, const at::Tensor& ids,
                        const at::Tensor& w13, const at::Tensor& w2, int64_t first) {
  const int64_t I = w2.size(2);
  at::Tensor y = at::zeros_like(x);
  at::Tensor idsCpu = ids.cpu();
  for (int64_t e = 0; e < w13.size(0); ++e) {
    const at::Tensor hit = idsCpu.eq(first + e).nonzero();  // [n, 2]: (token, choice)
    if (hit.size(0) == 0) continue;
    const at::Tensor tokens = hit.select(1, 0).to(x.device()),
                     choice = hit.select(1, 1).to(x.device());
    const at::Tensor gu = at::matmul(x.index_select(0, tokens), w13[e].t());
    const at::Tensor h = at::silu(gu.narrow(-1, 0, I)) * gu.narrow(-1, I, I);
    const at::Tensor w = weights.index({tokens, choice}).unsqueeze(1);
    y.index_add_(0, tokens, at::matmul(h, w2[e].t()) * w);
  }
  return y;
}

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

class TestFusedOps : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() {
    if (!at::hasCUDA()) QSKIP("no CUDA device: the fused kernels run on the GPU only");
    at::manual_seed(7);
  }

  void rmsNormRows_data() {
    QTest::addColumn<int>("dtype");
    QTest::addColumn<int>("dim");
    for (int dim : {4096, 128, 100}) {  // 100: not a multiple of the vector width
      QTest::addRow("fp32 dim %d", dim) << int(at::kFloat) << dim;
      QTest::addRow("bf16 dim %d", dim) << int(at::kBFloat16) << dim;
    }
  }
  void rmsNormRows() {
    QFETCH(int, dtype);
    QFETCH(int, dim);
    const auto o = gpu(at::ScalarType(dtype));
    at::Tensor x = at::randn({37, dim}, o) * 3, w = at::rand({dim}, o) + 0.5;
    expectClose(fused::rmsNorm(x, w, 1e-6), referenceNorm(x, w, 1e-6), 0.99, "rms_norm");
  }

  // Rows one warp covers (a head's q/k norm over a prompt) run a row a warp, 8 rows a block; each
  // row is bit for bit what a block a row (the kernel for a single row) makes of it.
  void rmsNormWarpRowsEqualBlockRows_data() {
    QTest::addColumn<int>("dtype");
    QTest::addColumn<int>("dim");
    for (int dim : {128, 64, 100}) {
      QTest::addRow("fp32 dim %d", dim) << int(at::kFloat) << dim;
      QTest::addRow("bf16 dim %d", dim) << int(at::kBFloat16) << dim;
      QTest::addRow("fp16 dim %d", dim) << int(at::kHalf) << dim;
    }
  }
  void rmsNormWarpRowsEqualBlockRows() {
    QFETCH(int, dtype);
    QFETCH(int, dim);
    const auto o = gpu(at::ScalarType(dtype));
    at::Tensor x = at::randn({83, dim}, o) * 3, w = at::rand({dim}, o) + 0.5;
    const at::Tensor together = fused::rmsNorm(x, w, 1e-6);
    for (int64_t r = 0; r < x.size(0); ++r) {
      QVERIFY2(at::equal(together[r], fused::rmsNorm(x.narrow(0, r, 1), w, 1e-6)[0]),
               qPrintable(QString("row %1").arg(r)));
    }
  }

  // q_norm / k_norm of Qwen3: heads of 128 read where they lie in the fused qkv output.
  void rmsNormHeadsInPlace_data() { dtypeRows(); }
  void rmsNormHeadsInPlace() {
    QFETCH(int, dtype);
    const auto o = gpu(at::ScalarType(dtype));
    const int64_t T = 9, d = 128, nq = 8, nkv = 2;
    at::Tensor qkv = at::randn({T, (nq + 2 * nkv) * d}, o);
    at::Tensor k = qkv.narrow(1, nq * d, nkv * d).reshape({T, nkv, d});  // a strided view
    QVERIFY(!k.is_contiguous());
    at::Tensor w = at::rand({d}, o) + 0.5;
    expectClose(fused::rmsNorm(k, w, 1e-6), referenceNorm(k.contiguous(), w, 1e-6), 0.99, "k_norm");
  }

  void addRmsNorm_data() { dtypeRows(); }
  void addRmsNorm() {
    QFETCH(int, dtype);
    const auto o = gpu(at::ScalarType(dtype));
    at::Tensor x = at::randn({5, 4096}, o), r = at::randn({5, 4096}, o) * 4;
    at::Tensor w = at::rand({4096}, o) + 0.5;
    auto [normed, sum] = fused::addRmsNorm(x, r, w, 1e-6);
    QVERIFY(at::equal(sum, x + r));  // one rounding on both sides
    expectClose(normed, referenceNorm(x + r, w, 1e-6), 0.99, "fused_add_rms_norm");
  }

  void rotary_data() { dtypeRows(); }
  void rotary() {
    QFETCH(int, dtype);
    const auto t = at::ScalarType(dtype);
    // d = 128: two elements a load; d = 6 (an odd half): one.
    for (const int64_t d : {int64_t(128), int64_t(6)}) {
      const int64_t nq = 4, nkv = 2, P = 64;
      at::Tensor freqs =
          at::outer(at::arange(P, gpu(at::kFloat)),
                    1.0 / at::pow(10000.0, at::arange(0, d, 2, gpu(at::kFloat)) / double(d)));
      at::Tensor cos = freqs.cos().to(t), sin = freqs.sin().to(t);
      // A few decode-like positions, then a prompt of 333 tokens (a warp a row, 8 rows a block).
      for (const at::Tensor& positions : {at::tensor({0, 1, 2, 7, 31, 63}, gpu(at::kLong)),
                                          at::arange(333, gpu(at::kLong)) % P}) {
        const int64_t T = positions.size(0);
        at::Tensor qkv = at::randn({T, (nq + 2 * nkv) * d}, gpu(t));
        at::Tensor q = qkv.narrow(1, 0, nq * d), k = qkv.narrow(1, nq * d, nkv * d);  // strided
        auto [qr, kr] = fused::rotary(q, k, cos, sin, positions, d);
        at::Tensor c = cos.index_select(0, positions), s = sin.index_select(0, positions);
        expectClose(qr, referenceRotary(q, c, s, d), 1.0, "rotary q");  // same roundings: exact
        expectClose(kr, referenceRotary(k, c, s, d), 1.0, "rotary k");
      }
    }
  }

  void siluAndMul_data() {
    QTest::addColumn<int>("dtype");
    QTest::addColumn<int>("half");
    for (int half : {12288, 100}) {
      QTest::addRow("fp32 %d", half) << int(at::kFloat) << half;
      QTest::addRow("bf16 %d", half) << int(at::kBFloat16) << half;
    }
  }
  void siluAndMul() {
    QFETCH(int, dtype);
    QFETCH(int, half);
    at::Tensor x = at::randn({7, 2 * half}, gpu(at::ScalarType(dtype))) * 4;
    at::Tensor reference = at::silu(x.narrow(1, 0, half)) * x.narrow(1, half, half);
    expectClose(fused::siluAndMul(x), reference, 0.99, "silu_and_mul");
  }

  // A decode step's linear layers: 1 to 4 rows, with and without bias, a column count that
  // leaves a block part-empty; shapes the kernel does not take are left to the caller.
  void gemv_data() {
    QTest::addColumn<int>("dtype");
    QTest::addColumn<int>("rows");
    QTest::addColumn<bool>("bias");
    for (int rows : {1, 2, 3, 4}) {
      QTest::addRow("fp32 %d rows", rows) << int(at::kFloat) << rows << false;
      QTest::addRow("bf16 %d rows", rows) << int(at::kBFloat16) << rows << false;
    }
    QTest::addRow("bf16 bias") << int(at::kBFloat16) << 1 << true;
    QTest::addRow("fp32 bias") << int(at::kFloat) << 3 << true;
  }
  void gemv() {
    QFETCH(int, dtype);
    QFETCH(int, rows);
    QFETCH(bool, bias);
    const auto o = gpu(at::ScalarType(dtype));
    const int64_t n = 1003, k = 4096;
    at::Tensor x = at::randn({rows, k}, o), w = at::randn({n, k}, o) * 0.02;
    at::Tensor b = bias ? at::randn({n}, o) : at::Tensor();
    at::Tensor y = fused::gemv(x, w, b);
    QVERIFY(y.defined());
    at::Tensor reference = bias ? at::addmm(b, x, w.t()) : at::matmul(x, w.t());
    expectClose(y, reference, 0.9, "gemv");
  }
  // Qwen3's decode attention input: q/k heads normed and rotated, k and v written into the
  // cache rows of their requests (slots out of order), nothing else in the cache touched.
  void qkvToCache_data() { dtypeRows(); }
  void qkvToCache() {
    QFETCH(int, dtype);
    const auto t = at::ScalarType(dtype);
    const int64_t R = 3, d = 128, nq = 8, nkv = 2, capacity = 40, P = 64;
    at::Tensor qkv = at::randn({R, (nq + 2 * nkv) * d}, gpu(t));
    at::Tensor qw = at::rand({d}, gpu(t)) + 0.5, kw = at::rand({d}, gpu(t)) + 0.5;
    at::Tensor freqs = at::outer(at::arange(P, gpu(at::kFloat)),
                                 1.0 / at::pow(10000.0, at::arange(0, d, 2, gpu(at::kFloat)) / d));
    fused::QkvToCache in;
    in.qkv = qkv;
    in.qHeads = nq;
    in.kvHeads = nkv;
    in.headDim = d;
    in.qNorm = qw;
    in.kNorm = kw;
    in.cos = freqs.cos().to(t);
    in.sin = freqs.sin().to(t);
    in.positions = at::tensor({5, 0, 39}, gpu(at::kLong));
    in.slots = at::tensor({2, 0, 1}, gpu(at::kLong));
    in.keyCache = at::zeros({R, capacity, nkv, d}, gpu(t));
    in.valueCache = at::zeros({R, capacity, nkv, d}, gpu(t));
    const at::Tensor q = fused::qkvToCache(in);

    at::Tensor c = in.cos.index_select(0, in.positions), s = in.sin.index_select(0, in.positions);
    const auto heads = [&](int64_t first, int64_t count, const at::Tensor& w) {
      at::Tensor x = qkv.narrow(1, first * d, count * d).reshape({R, count, d});
      return referenceRotary(referenceNorm(x, w, 1e-6).reshape({R, -1}), c, s, d);
    };
    expectClose(q, heads(0, nq, qw), 0.99, "q");
    at::Tensor k = heads(nq, nkv, kw).view({R, nkv, d});
    at::Tensor v = qkv.narrow(1, (nq + nkv) * d, nkv * d).reshape({R, nkv, d});
    const int64_t slots[] = {2, 0, 1}, positions[] = {5, 0, 39};
    for (int64_t r = 0; r < R; ++r) {
      expectClose(in.keyCache[slots[r]][positions[r]], k[r], 0.99, "cached k");
      QVERIFY(at::equal(in.valueCache[slots[r]][positions[r]], v[r]));
    }
    QCOMPARE(in.keyCache.ne(0).any(-1).any(-1).sum().item<int64_t>(), R);  // nothing else written
  }

  // qkvToCache and decodeAttention as one kernel: the output and both caches equal the two
  // kernels' bit for bit, for every group and head size the kernel takes, with and without q/k
  // norms, a request at position 0 and one at the chunk's last key, slots out of order; a span
  // past one chunk, and SHARDSCOPE_FUSED_ATTENTION=0, leave it to the two kernels.
  void qkvDecodeAttention_data() {
    QTest::addColumn<int>("dtype");
    QTest::addColumn<int>("group");
    QTest::addColumn<int>("headDim");
    QTest::addColumn<bool>("norms");
    for (int group : {1, 2, 4, 8}) {
      QTest::addRow("bf16 group %d d 128", group) << int(at::kBFloat16) << group << 128 << true;
      QTest::addRow("fp32 group %d d 128", group) << int(at::kFloat) << group << 128 << true;
    }
    QTest::addRow("bf16 d 64 no norms") << int(at::kBFloat16) << 4 << 64 << false;
    QTest::addRow("fp16 d 256") << int(at::kHalf) << 2 << 256 << true;
    QTest::addRow("fp32 d 256 no norms") << int(at::kFloat) << 8 << 256 << false;
    QTest::addRow("fp16 d 64") << int(at::kHalf) << 8 << 64 << true;
  }
  void qkvDecodeAttention() {
    QFETCH(int, dtype);
    QFETCH(int, group);
    QFETCH(int, headDim);
    QFETCH(bool, norms);
    const auto t = at::ScalarType(dtype);
    const int64_t R = 4, d = headDim, nkv = 2, nq = nkv * group, span = 512, capacity = 520;
    const double scale = 1.0 / std::sqrt(double(d));
    at::Tensor freqs = at::outer(at::arange(capacity, gpu(at::kFloat)),
                                 1.0 / at::pow(10000.0, at::arange(0, d, 2, gpu(at::kFloat)) / d));
    fused::QkvToCache in;
    in.qkv = at::randn({R, (nq + 2 * nkv) * d}, gpu(t));
    in.qHeads = nq;
    in.kvHeads = nkv;
    in.headDim = d;
    if (norms) {
      in.qNorm = at::rand({d}, gpu(t)) + 0.5;
      in.kNorm = at::rand({d}, gpu(t)) + 0.5;
    }
    in.cos = freqs.cos().to(t);
    in.sin = freqs.sin().to(t);
    in.positions = at::tensor({5, 0, 511, 130}, gpu(at::kLong));
    in.slots = at::tensor({2, 0, 3, 1}, gpu(at::kLong));
    const at::Tensor keys = at::randn({R, capacity, nkv, d}, gpu(t));
    const at::Tensor values = at::randn({R, capacity, nkv, d}, gpu(t));
    fused::QkvToCache two = in;
    two.keyCache = keys.clone();
    two.valueCache = values.clone();
    const at::Tensor expected =
        fused::decodeAttention(fused::qkvToCache(two), two.keyCache, two.valueCache, two.slots,
                               two.positions, nkv, span, scale);
    QVERIFY(expected.defined());
    in.keyCache = keys.clone();
    in.valueCache = values.clone();
    const at::Tensor out = fused::qkvDecodeAttention(in, span, scale);
    QVERIFY(out.defined());
    QVERIFY2(at::equal(out, expected), "attention output differs from the two kernels'");
    QVERIFY2(at::equal(in.keyCache, two.keyCache), "key cache differs from qkvToCache's");
    QVERIFY2(at::equal(in.valueCache, two.valueCache), "value cache differs from qkvToCache's");
    QVERIFY(!in.keyCache.equal(keys));  // the new keys were written
    QVERIFY(!fused::qkvDecodeAttention(in, span + 1, scale).defined());
    qputenv("SHARDSCOPE_FUSED_ATTENTION", "0");
    const bool off = !fused::qkvDecodeAttention(in, span, scale).defined();
    qunsetenv("SHARDSCOPE_FUSED_ATTENTION");
    QVERIFY2(off, "SHARDSCOPE_FUSED_ATTENTION=0 still ran the fused kernel");
  }

  // Decode attention against softmax(q k^T / sqrt(d)) v over each request's keys 0..position,
  // in one chunk of keys and in several (combined by a second kernel).
  void decodeAttention_data() {
    QTest::addColumn<int>("dtype");
    QTest::addColumn<int>("span");
    QTest::addColumn<int>("group");
    QTest::addColumn<int>("headDim");
    for (int span : {128, 1024}) {  // one chunk of keys; two, combined by a second kernel
      QTest::addRow("fp32 span %d", span) << int(at::kFloat) << span << 4 << 128;
      QTest::addRow("bf16 span %d", span) << int(at::kBFloat16) << span << 4 << 128;
    }
    QTest::addRow("bf16 group 8 d 64") << int(at::kBFloat16) << 700 << 8 << 64;
    QTest::addRow("fp32 group 1 d 256") << int(at::kFloat) << 300 << 1 << 256;
    QTest::addRow("bf16 group 8 d 128 span 256") << int(at::kBFloat16) << 256 << 8 << 128;
  }
  void decodeAttention() {
    QFETCH(int, dtype);
    QFETCH(int, span);
    QFETCH(int, group);
    QFETCH(int, headDim);
    const auto t = at::ScalarType(dtype);
    const int64_t R = 3, d = headDim, nkv = 2, nq = nkv * group, capacity = 1100;
    const std::vector<int64_t> slots = {1, 2, 0}, lengths = {1, span / 2 + 3, span};
    at::Tensor keys = at::randn({R, capacity, nkv, d}, gpu(t));
    at::Tensor values = at::randn({R, capacity, nkv, d}, gpu(t));
    at::Tensor q = at::randn({R, nq * d}, gpu(t));
    at::Tensor positions =
        at::tensor({lengths[0] - 1, lengths[1] - 1, lengths[2] - 1}, gpu(at::kLong));
    const double scale = 1.0 / std::sqrt(double(d));
    at::Tensor out = fused::decodeAttention(q, keys, values, at::tensor(slots, gpu(at::kLong)),
                                            positions, nkv, span, scale);
    QVERIFY(out.defined());
    std::vector<at::Tensor> rows;
    for (int64_t r = 0; r < R; ++r) {
      at::Tensor k = keys[slots[r]].narrow(0, 0, lengths[r]).to(at::kFloat);  // [L, nkv, d]
      at::Tensor v = values[slots[r]].narrow(0, 0, lengths[r]).to(at::kFloat);
      at::Tensor qh = q[r].view({nkv, group, d}).to(at::kFloat);
      at::Tensor scores = at::einsum("kgd,lkd->kgl", {qh, k}) * scale;
      at::Tensor o = at::einsum("kgl,lkd->kgd", {at::softmax(scores, -1), v});
      rows.push_back(o.reshape({nq * d}).to(t));
    }
    expectClose(out, at::stack(rows), 0.9, "decode attention");
    // A short context runs a query head a block; a KV head's whole group a block gives the same
    // bits (each head's sums are its own).
    qputenv("SHARDSCOPE_ATTENTION_BLOCKS", "group");
    const at::Tensor grouped = fused::decodeAttention(
        q, keys, values, at::tensor(slots, gpu(at::kLong)), positions, nkv, span, scale);
    qunsetenv("SHARDSCOPE_ATTENTION_BLOCKS");
    QVERIFY2(at::equal(out, grouped), "one head a block differs from a group a block");
    // A group the kernel does not take is left to SDPA.
    QVERIFY(!fused::decodeAttention(at::randn({R, 3 * nkv * d}, gpu(t)), keys, values,
                                    at::tensor(slots, gpu(at::kLong)), positions, nkv, span, scale)
                 .defined());
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
  // warps (top 12) are rows of their own.
  void fusedMoeFromRouter_data() {
    QTest::addColumn<int>("dtype");
    QTest::addColumn<int>("tokens");
    QTest::addColumn<bool>("expertParallel");
    QTest::addColumn<int>("experts");
    QTest::addColumn<int>("topK");
    for (int t : {int(at::kFloat), int(at::kBFloat16)}) {
      const char* d = t == int(at::kFloat) ? "fp32" : "bf16";
      for (int T : {1, 4, 16, 256}) {
        for (bool ep : {false, true})
          QTest::addRow("%s T=%d%s", d, T, ep ? " ep" : "") << t << T << ep << 32 << 4;
      }
      QTest::addRow("%s T=1 E=128 k=8", d) << t << 1 << false << 128 << 8;
      QTest::addRow("%s T=1 E=64 k=12 ep", d) << t << 1 << true << 64 << 12;
    }
  }
  void fusedMoeFromRouter() {
    QFETCH(int, dtype);
    QFETCH(int, tokens);
    QFETCH(bool, expertParallel);
    QFETCH(int, experts);
    QFETCH(int, topK);
    const auto o = gpu(at::ScalarType(dtype));
    const int64_t E = experts, k = topK, H = 256, I = 96;
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
    expectClose(fromLogits, reference, 0.3, "fused_moe from logits");
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
    expectClose(fromWeight, referenceMoe(x, gw, gids, w13, w2, first), 0.3,
                "fused_moe with router");
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

  // The GEMV with the norm before it and SwiGLU after it folded in (a decoder layer's unobserved
  // step): bit for bit what the kernels it replaces write one after another (addRmsNorm or
  // rmsNorm, gemv, siluAndMul), and close to the ATen chain of Hugging Face's modules; 1 to 4
  // rows, fp32/bf16/fp16.
  void gemvFused_data() {
    QTest::addColumn<int>("dtype");
    QTest::addColumn<int>("rows");
    QTest::addColumn<bool>("norm");
    QTest::addColumn<bool>("residual");
    QTest::addColumn<bool>("swiGlu");
    QTest::addColumn<bool>("bias");
    const std::pair<int, const char*> types[] = {
        {int(at::kFloat), "fp32"}, {int(at::kBFloat16), "bf16"}, {int(at::kHalf), "fp16"}};
    for (const auto& [t, name] : types) {
      for (int rows : {1, 2, 3, 4}) {
        QTest::addRow("%s %d rows, norm", name, rows)
            << t << rows << true << false << false << false;
        QTest::addRow("%s %d rows, add+norm", name, rows)
            << t << rows << true << true << false << false;
        QTest::addRow("%s %d rows, swiglu", name, rows)
            << t << rows << false << false << true << false;
        QTest::addRow("%s %d rows, add+norm+swiglu", name, rows)
            << t << rows << true << true << true << false;
      }
      QTest::addRow("%s bias, add+norm+swiglu", name) << t << 2 << true << true << true << true;
    }
  }
  void gemvFused() {
    QFETCH(int, dtype);
    QFETCH(int, rows);
    QFETCH(bool, norm);
    QFETCH(bool, residual);
    QFETCH(bool, swiGlu);
    QFETCH(bool, bias);
    const auto o = gpu(at::ScalarType(dtype));
    // 4099 columns: with the norm the grid holds only the blocks that fit on the GPU at once, so
    // a warp computes several columns, and the last block is part-empty.
    const int64_t n = 4099, k = 4096, outRows = swiGlu ? 2 * n : n;
    fused::GemvInput in;
    in.x = at::randn({rows, k}, o);
    if (residual) in.residual = at::randn({rows, k}, o) * 4;
    if (norm) in.normWeight = at::rand({k}, o) + 0.5;
    in.w = at::randn({outRows, k}, o) * 0.02;
    if (bias) in.bias = at::randn({outRows}, o);
    in.swiGlu = swiGlu;
    const fused::GemvOutput out = fused::gemvFused(in);
    QVERIFY(out.y.defined());
    QCOMPARE(out.residualSum.defined(), residual);

    // The kernels one by one, as the module path runs them on the GPU.
    at::Tensor x = in.x, sum;
    if (residual) std::tie(x, sum) = fused::addRmsNorm(in.x, in.residual, in.normWeight, in.eps);
    if (norm && !residual) x = fused::rmsNorm(in.x, in.normWeight, in.eps);
    at::Tensor y = fused::gemv(x, in.w, in.bias);
    if (swiGlu) y = fused::siluAndMul(y);
    QVERIFY(at::equal(out.y, y));
    if (residual) QVERIFY(at::equal(out.residualSum, sum));

    // Hugging Face's modules in ATen.
    at::Tensor hx = in.x;
    if (residual) hx = in.x + in.residual;
    if (norm) hx = referenceNorm(hx, in.normWeight, in.eps);
    at::Tensor hy = bias ? at::addmm(in.bias, hx, in.w.t()) : at::matmul(hx, in.w.t());
    if (swiGlu) hy = at::silu(hy.narrow(1, 0, n)) * hy.narrow(1, n, n);
    // Against the reference's scale: a GEMV's sum order differs from cuBLAS's by a last bit,
    // which SwiGLU can carry into a neighbouring value of the dtype.
    const double tolerance = dtype == int(at::kFloat)  ? 1e-5
                             : dtype == int(at::kHalf) ? 4e-3
                                                       : 2e-2;
    QVERIFY2(test::closeToScale(out.y, hy, tolerance),
             test::closeToScaleMessage(out.y, hy).c_str());
  }

  // Shapes gemvFused does not take come back undefined (the layer runs its modules instead).
  void gemvFusedLeavesOtherShapes() {
    const auto o = gpu(at::kBFloat16);
    fused::GemvInput in;
    in.x = at::randn({1, 4096}, o);
    in.w = at::randn({64, 4096}, o);
    in.normWeight = at::ones({4096}, o);
    QVERIFY(fused::gemvFused(in).y.defined());
    const auto refused = [](fused::GemvInput bad) { return !fused::gemvFused(bad).y.defined(); };
    fused::GemvInput bad = in;
    bad.x = at::randn({5, 4096}, o);  // too many rows
    QVERIFY(refused(bad));
    bad = in;
    bad.x = at::randn({1, 100}, o);  // k not a multiple of 16 bytes
    bad.w = at::randn({64, 100}, o);
    bad.normWeight = at::ones({100}, o);
    QVERIFY(refused(bad));
    bad = in;
    bad.x = at::randn({1, 4096}, gpu(at::kFloat));  // dtypes differ
    QVERIFY(refused(bad));
    bad = in;
    bad.normWeight = at::ones({4095}, o);  // norm weight of another width
    QVERIFY(refused(bad));
    bad = in;
    bad.normWeight = at::Tensor();
    bad.residual = at::randn({1, 4096}, o);  // a residual needs the norm
    QVERIFY(refused(bad));
    bad = in;
    bad.residual = at::randn({2, 4096}, o);  // residual rows differ
    QVERIFY(refused(bad));
    bad = in;
    bad.w = at::randn({63, 4096}, o);  // SwiGLU needs gate and up rows in pairs
    bad.swiGlu = true;
    QVERIFY(refused(bad));
    bad = in;
    bad.x = at::randn({2, 8192}, o).narrow(1, 0, 4096);  // rows not contiguous
    QVERIFY(refused(bad));
    bad = in;  // four fp32 rows of 65536 do not fit in a block's shared memory
    bad.x = at::randn({4, 65536}, gpu(at::kFloat));
    bad.w = at::randn({2, 65536}, gpu(at::kFloat));
    bad.normWeight = at::ones({65536}, gpu(at::kFloat));
    QVERIFY(refused(bad));
    bad.normWeight = at::Tensor();  // without the norm nothing goes to shared memory
    QVERIFY(!refused(bad));
  }

  void gemvLeavesOtherShapes() {
    const auto o = gpu(at::kBFloat16);
    at::Tensor w = at::randn({64, 4096}, o);
    QVERIFY(!fused::gemv(at::randn({5, 4096}, o), w).defined());  // too many rows
    QVERIFY(!fused::gemv(at::randn({1, 100}, o), at::randn({64, 100}, o)).defined());  // k % 8
    QVERIFY(!fused::gemv(at::randn({1, 4096}, gpu(at::kFloat)), w).defined());  // dtypes differ
    QVERIFY(!fused::gemv(at::randn({1, 4096}, o), w.t().contiguous().t()).defined());
  }
};

QTEST_GUILESS_MAIN(TestFusedOps)
#include "tst_fused_ops.moc"
