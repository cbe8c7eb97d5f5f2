// The engine against Hugging Face transformers: tiny random Qwen3, Qwen2 (qkv bias) and Llama
// (llama3 RoPE scaling, tied embeddings, sharded checkpoint) made by tests/golden/make_golden.py.
// At tp=1, 2 and 4: prefill logits at every position and 8 decode steps through the KV cache
// within 1e-4 relative error (max |ours - HF| / max |HF|), greedy ids identical.
#include <QtTest>

#include <cstring>

#include "common/test_support.h"
#include "core/engine/engine.h"
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

double relativeError(const at::Tensor& ours, const at::Tensor& ref) {
  return (ours.to(at::kDouble) - ref.to(at::kDouble)).abs().max().item<double>() /
         ref.abs().max().item<double>();
}

// Logits at every prompt position (the generation loop keeps only the last row).
at::Tensor prefillLogitsAllPositions(Engine& engine, const std::vector<int64_t>& ids) {
  auto out = std::make_shared<at::Tensor>();
  JobHandle h = engine.submit([ids, out](RankContext& ctx) {
    const auto& c = ctx.model.config();
    const int64_t n = int64_t(ids.size());
    KvCache cache(c.numLayers, n, ctx.model.kvHeadsPerRank(), c.headDim,
                  at::TensorOptions().dtype(ctx.dtype).device(ctx.device));
    ForwardBatch batch{
        ctx.group, at::arange(n, at::kLong).to(ctx.device), {{0, n, 0, &cache}}, nullptr, 0, {}, {}};
    at::Tensor hidden = ctx.model.forward(at::tensor(ids, at::kLong).to(ctx.device), batch);
    at::Tensor logits = ctx.model.logits(hidden, batch);
    if (ctx.rank == 0) *out = logits.to(at::kCPU, at::kFloat);
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
    const double tolerance = dtype == "f32" ? 1e-4 : 3e-2;
    const Golden g = loadGolden(model.toStdString(), dtype.toStdString());
    EngineOptions o;
    o.model = test::goldenModel(model.toStdString()).string();
    o.tp = tp;
    o.device = test::device();
    o.dtype = dtype.toStdString();
    o.backend = test::backend();
    if (o.backend == "nccl" && int(at::getNumGPUs()) < tp) QSKIP("NCCL needs one GPU per rank");
    Engine engine(o);

    const at::Tensor prefill = prefillLogitsAllPositions(engine, g.inputIds);
    const double prefillErr = relativeError(prefill, g.prefill);
    QVERIFY2(prefillErr <= tolerance, ("prefill relative error " + std::to_string(prefillErr)).c_str());

    GenerateRequest r;
    r.prompts = {g.inputIds};
    r.sampling.maxTokens = int64_t(g.greedy.size());
    r.sampling.ignoreEos = true;
    r.returnLogits = true;
    const GenerateResult result = Engine::generateResult(engine.generate(r));
    QCOMPARE(result.outputs[0].tokenIds, g.greedy);
    const at::Tensor steps = fromHostFloat(result.outputs[0].logits);  // [9, V]
    const double lastErr = relativeError(steps[0], g.prefill[-1]);
    const double decodeErr = relativeError(steps.narrow(0, 1, g.decode.size(0)), g.decode);
    QVERIFY2(lastErr <= tolerance,
             ("prefill last-row relative error " + std::to_string(lastErr)).c_str());
    QVERIFY2(decodeErr <= tolerance, ("decode relative error " + std::to_string(decodeErr)).c_str());
    qInfo("%s %s tp=%d: prefill %.2e, decode %.2e relative error", qPrintable(model),
          qPrintable(dtype), tp, prefillErr, decodeErr);
  }
};

QTEST_GUILESS_MAIN(TestHfGolden)
#include "tst_hf_golden.moc"
