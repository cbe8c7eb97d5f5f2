// The fused CUDA kernels of a dense layer (core/kernels: norms, rotary, SwiGLU, GEMVs, the KV
// cache write and decode attention) against the ATen chains they replace, written as Hugging
// Face's modules compute them: fp32 and bf16 (fp16 too for the fused GEMV), vectorised and scalar
// row widths, q/k heads read in place from a fused qkv row. The MoE kernels: tst_moe_kernels.
// Built only with the kernels; skips without a GPU.
#include <QtTest>

#include <cmath>

#include "common/kernel_checks.h"
#include "common/scoped_switch.h"
#include "common/tensor_checks.h"
#include "core/kernels/fused_ops.h"

using namespace shardscope;
using test::dtypeRows;
using test::expectClose;
using test::gpu;

namespace {

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
    const bool off = [&] {
      const test::ScopedSwitch apart("SHARDSCOPE_FUSED_ATTENTION", "0");
      return !fused::qkvDecodeAttention(in, span, scale).defined();
    }();
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
    const at::Tensor grouped = [&] {
      const test::ScopedSwitch groups("SHARDSCOPE_ATTENTION_BLOCKS", "group");
      return fused::decodeAttention(q, keys, values, at::tensor(slots, gpu(at::kLong)), positions,
                                    nkv, span, scale);
    }();
    QVERIFY2(at::equal(out, grouped), "one head a block differs from a group a block");
    // A group the kernel does not take is left to SDPA.
    QVERIFY(!fused::decodeAttention(at::randn({R, 3 * nkv * d}, gpu(t)), keys, values,
                                    at::tensor(slots, gpu(at::kLong)), positions, nkv, span, scale)
                 .defined());
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

  // The shared-memory opt-in is one value a kernel and device: a launch that needs more (fp32, 4
  // rows of 4096: 64 KB), one that needs less (3584: 56 KB), then the first again. A launch cache
  // that set it per size lowered it for the second and failed the third.
  void gemvNormOptInSurvivesASmallerLaunch() {
    const auto o = gpu(at::kFloat);
    for (const int64_t k : {4096, 3584, 4096}) {
      fused::GemvInput in;
      in.x = at::randn({4, k}, o);
      in.normWeight = at::rand({k}, o) + 0.5;
      in.w = at::randn({256, k}, o) * 0.02;
      const fused::GemvOutput out = fused::gemvFused(in);
      QVERIFY2(out.y.defined(), ("k = " + std::to_string(k)).c_str());
      QVERIFY(at::equal(out.y, fused::gemv(fused::rmsNorm(in.x, in.normWeight, in.eps), in.w)));
    }
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
