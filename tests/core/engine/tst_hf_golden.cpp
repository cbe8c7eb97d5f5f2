// The engine against Hugging Face transformers: tiny random Qwen3, Qwen2 (qkv bias) and Llama
// (llama3 RoPE scaling, tied embeddings, sharded checkpoint) made by tests/golden/make_golden.py,
// Qwen3-MoE (8 experts, top-2, one dense layer) made by tests/golden/qwen3_moe/make_golden.py,
// and DeepSeek-V2 (V2-Lite style and V2 style with q LoRA and group-limited routing) made by
// tests/golden/deepseek_v2/make_golden.py. At tp=1, 2 and 4 (MoE: in both expert layouts;
// DeepSeek also tp=4 with decode_context_parallel_size 2 and 4), and the dense and MoE models
// split into pipeline stages at (tp, pp) = (1, 2), (2, 2) and, for the 4-layer MoE model, (1, 4):
// prefill logits at every position and 8 decode steps through the KV cache within 1e-4 relative
// error (max |ours - HF| / max |HF|), greedy ids identical; MoE requests batched equal each alone.
#include <QtTest>

#include <cstring>

#include "common/golden_engine.h"
#include "common/tensor_checks.h"
#include "common/test_support.h"
#include "core/engine/engine.h"
#include "core/engine/pipeline_step.h"
#include "core/engine/rank_context.h"
#include "core/host_tensor_conversion.h"
#include "core/model/safetensors_file.h"

using namespace shardscope;

namespace {

struct Golden {
  std::vector<int64_t> inputIds;
  at::Tensor prefill;  // [7, V]
  at::Tensor decode;   // [8, V]
  std::vector<int64_t> greedy;
};

// golden.safetensors: transformers in fp32; golden-bf16.safetensors: the same model cast to bf16.
Golden loadGolden(const std::string& model, const std::string& dtype) {
  SafetensorsFile f(test::goldenModel(model) /
                    (dtype == "bf16" ? "golden-bf16.safetensors" : "golden.safetensors"));
  const auto get = [&](const char* n) { return f.view(f.entry(n)).clone(); };
  const auto ids = [](const at::Tensor& t) {
    return std::vector<int64_t>(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + t.numel());
  };
  return {ids(get("input_ids")), get("prefill_logits"), get("decode_logits"),
          ids(get("greedy_ids"))};
}

// Logits at every prompt position (the generation loop keeps only the last row).
at::Tensor prefillLogitsAllPositions(Engine& engine, const std::vector<int64_t>& ids) {
  auto out = std::make_shared<at::Tensor>();
  JobHandle h = engine.submit([ids, out](RankContext& ctx) {
    const auto& c = ctx.model.config();
    const int64_t n = int64_t(ids.size());
    const KvCacheLayout layout = ctx.model.kvCacheLayout();
    KvCache cache(c.numLayers, layout.localCapacity(n), layout.heads, layout.headDim,
                  at::TensorOptions().dtype(ctx.dtype).device(ctx.device), 1, layout.parts);
    ForwardBatch batch{
        ctx.group, at::arange(n, at::kLong).to(ctx.device), {{0, n, 0, &cache}}, nullptr, 0, {},
        {}};
    at::Tensor logits =
        runStages(ctx, at::tensor(ids, at::kLong).to(ctx.device), batch,
                  [&](const at::Tensor& hidden) { return ctx.model.logits(hidden, batch); });
    if (ctx.isSampler()) *out = logits.to(at::kCPU, at::kFloat);
  });
  h.wait();
  return *out;
}

}  // namespace

class TestHfGolden : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void matchesTransformers_data() {
    QTest::addColumn<QString>("model");
    QTest::addColumn<int>("tp");
    QTest::addColumn<QString>("dtype");
    for (const QString m : {"qwen3-tiny", "qwen2-tiny", "llama-tiny"}) {
      for (int tp : {1, 2, 4})
        QTest::newRow(qPrintable(m + "_tp" + QString::number(tp))) << m << tp << "f32";
      // bf16 against transformers' bf16 run: a bf16-sized tolerance, the same greedy ids.
      for (int tp : {1, 2})
        QTest::newRow(qPrintable(m + "_bf16_tp" + QString::number(tp))) << m << tp << "bf16";
    }
  }
  void matchesTransformers() {
    QFETCH(QString, model);
    QFETCH(int, tp);
    QFETCH(QString, dtype);
    const Golden g = loadGolden(model.toStdString(), dtype.toStdString());
    const EngineOptions o = test::goldenEngineOptions(model.toStdString(), tp, dtype.toStdString());
    if (!test::hasGpuPerRank(o)) QSKIP("NCCL needs one GPU per rank");
    Engine engine(o);
    if (dtype == "bf16") return checkBf16(engine, g, model, tp);

    checkF32(engine, g, model, tp);
  }

  // Qwen3-MoE: the default layout (every rank a slice of every expert) and expert parallel.
  void qwen3MoeMatchesTransformers_data() {
    QTest::addColumn<int>("tp");
    QTest::addColumn<bool>("expertParallel");
    for (int tp : {1, 2, 4}) {
      QTest::newRow(qPrintable("tp" + QString::number(tp))) << tp << false;
      QTest::newRow(qPrintable("ep_tp" + QString::number(tp))) << tp << true;
    }
  }
  void qwen3MoeMatchesTransformers() {
    QFETCH(int, tp);
    QFETCH(bool, expertParallel);
    const Golden g = loadGolden("qwen3-moe-tiny", "f32");
    EngineOptions o = moeOptions(tp, expertParallel);
    if (!test::hasGpuPerRank(o)) QSKIP("NCCL needs one GPU per rank");
    Engine engine(o);
    QCOMPARE(QString::fromStdString(engine.info().family), QString("qwen3_moe"));
    checkF32(engine, g, expertParallel ? "qwen3-moe-tiny (expert parallel)" : "qwen3-moe-tiny", tp);
  }

  // Pipeline stages (vLLM's pipeline_parallel_size): the layers split into pp stages, each
  // sharded tp ways, give transformers' logits and ids as one rank does. The dense models have two
  // layers (llama-tiny's tied embeddings: the last stage reads the embedding for its head); the
  // MoE model has four, so it also runs as four stages of one layer.
  void stagesMatchTransformers_data() {
    QTest::addColumn<QString>("model");
    QTest::addColumn<int>("tp");
    QTest::addColumn<int>("pp");
    for (const QString m : {"qwen3-tiny", "qwen2-tiny", "llama-tiny", "qwen3-moe-tiny"}) {
      QTest::newRow(qPrintable(m + "_tp1_pp2")) << m << 1 << 2;
      QTest::newRow(qPrintable(m + "_tp2_pp2")) << m << 2 << 2;
    }
    QTest::newRow("qwen3-moe-tiny_tp1_pp4") << "qwen3-moe-tiny" << 1 << 4;
  }
  void stagesMatchTransformers() {
    QFETCH(QString, model);
    QFETCH(int, tp);
    QFETCH(int, pp);
    const Golden g = loadGolden(model.toStdString(), "f32");
    EngineOptions o = test::goldenEngineOptions(model.toStdString(), tp);
    o.pp = pp;
    if (!test::hasGpuPerRank(o)) QSKIP("NCCL needs one GPU per rank");
    Engine engine(o);
    QCOMPARE(engine.info().pp, pp);
    checkF32(engine, g, model + " pp=" + QString::number(pp), tp);
  }

  // DeepSeek-V2: MLA over a latent cache, shared experts, YaRN; decode-context parallel at tp=4.
  void deepseekV2MatchesTransformers_data() {
    QTest::addColumn<QString>("model");
    QTest::addColumn<int>("tp");
    QTest::addColumn<int>("dcp");
    for (const QString m : {"deepseek-v2-lite-tiny", "deepseek-v2-tiny"}) {
      for (int tp : {1, 2, 4})
        QTest::newRow(qPrintable(m + "_tp" + QString::number(tp))) << m << tp << 1;
      QTest::newRow(qPrintable(m + "_tp4_dcp2")) << m << 4 << 2;
      QTest::newRow(qPrintable(m + "_tp4_dcp4")) << m << 4 << 4;
    }
  }
  void deepseekV2MatchesTransformers() {
    QFETCH(QString, model);
    QFETCH(int, tp);
    QFETCH(int, dcp);
    const Golden g = loadGolden(model.toStdString(), "f32");
    EngineOptions o = test::goldenEngineOptions(model.toStdString(), tp);
    o.dcp = dcp;
    if (!test::hasGpuPerRank(o)) QSKIP("NCCL needs one GPU per rank");
    Engine engine(o);
    QCOMPARE(QString::fromStdString(engine.info().family), QString("deepseek_v2"));
    checkF32(engine, g, model + " dcp=" + QString::number(dcp), tp);
  }

  // DeepSeek-V2 runs as one pipeline stage: --pp refuses, alone and with --dcp, naming what works.
  void deepseekV2RefusesStages_data() {
    QTest::addColumn<int>("dcp");
    QTest::addColumn<QString>("expected");
    QTest::newRow("pp2") << 1 << "deepseek_v2 runs as one pipeline stage: use --pp 1";
    QTest::newRow("pp2_dcp2") << 2
                              << "pp=2 with dcp=2: decode-context parallelism runs on one "
                                 "pipeline stage";
  }
  void deepseekV2RefusesStages() {
    QFETCH(int, dcp);
    QFETCH(QString, expected);
    EngineOptions o;
    o.model = test::goldenModel("deepseek-v2-lite-tiny").string();
    o.tp = 2;
    o.pp = 2;
    o.dcp = dcp;
    o.dtype = DType::F32;
    o.backend = GroupBackend::Local;
    QString error;
    try {
      Engine engine(o);
    } catch (const std::exception& e) {
      error = e.what();
    }
    QVERIFY2(error.contains(expected), qPrintable(error));
  }

  // Requests batched give each one's ids and logits alone: two of different lengths (attention
  // one request at a time) and three of one length (on the GPU attention runs them as one batch).
  void qwen3MoeBatchingEqualsAlone_data() {
    QTest::addColumn<int>("tp");
    QTest::addColumn<bool>("expertParallel");
    QTest::addColumn<std::vector<std::vector<int64_t>>>("prompts");
    const std::vector<std::vector<int64_t>> uneven = {{3, 17, 42, 99, 123, 200, 7},
                                                      {5, 9, 240, 31}};
    const std::vector<std::vector<int64_t>> even = {
        {3, 17, 42, 99, 123}, {5, 9, 240, 31, 8}, {77, 1, 14, 249, 60}};
    QTest::newRow("default") << 2 << false << uneven;
    QTest::newRow("expert_parallel") << 2 << true << uneven;
    QTest::newRow("equal_lengths tp1") << 1 << false << even;
    QTest::newRow("equal_lengths") << 2 << false << even;
  }
  void qwen3MoeBatchingEqualsAlone() {
    QFETCH(int, tp);
    QFETCH(bool, expertParallel);
    QFETCH(std::vector<std::vector<int64_t>>, prompts);
    EngineOptions o = moeOptions(tp, expertParallel);
    if (!test::hasGpuPerRank(o)) QSKIP("NCCL needs one GPU per rank");
    Engine engine(o);
    GenerateRequest r;
    r.sampling.maxTokens = 6;
    r.sampling.ignoreEos = true;
    r.returnLogits = true;
    r.prompts = prompts;
    const GenerateResult both = Engine::generateResult(engine.generate(r));
    for (size_t i = 0; i < prompts.size(); ++i) {
      r.prompts = {prompts[i]};
      const GenerateResult alone = Engine::generateResult(engine.generate(r));
      QCOMPARE(both.outputs[i].tokenIds, alone.outputs[0].tokenIds);
      const double err = test::maxRelativeError(fromHostFloat(both.outputs[i].logits),
                                                fromHostFloat(alone.outputs[0].logits));
      QVERIFY2(err <= 1e-5,
               ("batched against alone: relative error " + std::to_string(err)).c_str());
    }
  }

 private:
  static EngineOptions moeOptions(int tp, bool expertParallel) {
    EngineOptions o = test::goldenEngineOptions("qwen3-moe-tiny", tp);
    o.expertParallel = expertParallel;
    return o;
  }

  // fp32 against transformers' fp32 run: prefill at every position, the generation loop's
  // prefill row and decode steps, and the greedy ids.
  static void checkF32(Engine& engine, const Golden& g, const QString& model, int tp) {
    const at::Tensor prefill = prefillLogitsAllPositions(engine, g.inputIds);
    const double prefillErr = test::maxRelativeError(prefill, g.prefill);
    QVERIFY2(prefillErr <= 1e-4, ("prefill relative error " + std::to_string(prefillErr)).c_str());

    GenerateRequest r;
    r.prompts = {g.inputIds};
    r.sampling.maxTokens = int64_t(g.greedy.size());
    r.sampling.ignoreEos = true;
    r.returnLogits = true;
    const GenerateResult result = Engine::generateResult(engine.generate(r));
    QCOMPARE(result.outputs[0].tokenIds, g.greedy);
    const at::Tensor steps = fromHostFloat(result.outputs[0].logits);  // [9, V]
    const double lastErr = test::maxRelativeError(steps[0], g.prefill[-1]);
    const double decodeErr = test::maxRelativeError(steps.narrow(0, 1, g.decode.size(0)), g.decode);
    QVERIFY2(lastErr <= 1e-4,
             ("prefill last-row relative error " + std::to_string(lastErr)).c_str());
    QVERIFY2(decodeErr <= 1e-4, ("decode relative error " + std::to_string(decodeErr)).c_str());
    qInfo("%s tp=%d: prefill %.2e, decode %.2e relative error", qPrintable(model), tp, prefillErr,
          decodeErr);
  }

  // bf16 against transformers' own bf16 run. Logits along transformers' greedy path (teacher
  // forced: prompt + its tokens in one prefill) within a bf16 tolerance; greedy ids identical
  // except at near-ties, where one bf16 rounding may pick either token (the tiny random models
  // have some).
  static void checkBf16(Engine& engine, const Golden& g, const QString& model, int tp) {
    const double tolerance = 5e-2;
    std::vector<int64_t> path = g.inputIds;
    path.insert(path.end(), g.greedy.begin(), g.greedy.end() - 1);
    const at::Tensor ours = prefillLogitsAllPositions(engine, path);
    const at::Tensor ref = at::cat({g.prefill, g.decode}, 0);  // [prompt + 8, V]
    const double err = test::maxRelativeError(ours, ref);
    QVERIFY2(err <= tolerance, ("bf16 relative error " + std::to_string(err)).c_str());
    // A step is a near-tie when transformers' top two logits are closer than twice the largest
    // difference measured between the two runs: only there may rounding pick the other token.
    const double tieMargin = 2 * err * ref.abs().max().item<double>();
    const int64_t first = int64_t(g.inputIds.size()) - 1;
    int ties = 0;
    for (size_t i = 0; i < g.greedy.size(); ++i) {
      const at::Tensor row = ref[first + int64_t(i)];
      const auto top2 = std::get<0>(row.topk(2));
      const bool nearTie = (top2[0] - top2[1]).item<double>() < tieMargin;
      ties += nearTie;
      if (!nearTie) QCOMPARE(ours[first + int64_t(i)].argmax().item<int64_t>(), g.greedy[i]);
    }
    // The decode path (KV cache) follows the same ids up to transformers' first near-tie.
    GenerateRequest r;
    r.prompts = {g.inputIds};
    r.sampling.maxTokens = int64_t(g.greedy.size());
    r.sampling.ignoreEos = true;
    const auto generated = Engine::generateResult(engine.generate(r)).outputs[0].tokenIds;
    for (size_t i = 0; i < g.greedy.size(); ++i) {
      const auto top2 = std::get<0>(ref[first + int64_t(i)].topk(2));
      if ((top2[0] - top2[1]).item<double>() < tieMargin) break;
      QCOMPARE(generated[i], g.greedy[i]);
    }
    qInfo("%s bf16 tp=%d: relative error %.2e on transformers' path; %d of %zu steps near-ties",
          qPrintable(model), tp, err, ties, g.greedy.size());
  }
};

QTEST_GUILESS_MAIN(TestHfGolden)
#include "tst_hf_golden.moc"
