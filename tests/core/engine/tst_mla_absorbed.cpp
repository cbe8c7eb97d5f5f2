// MLA's latent-space decode (kv_b_proj absorbed into the query and output sides, vLLM's MLA
// decode) against the expanded path that traces see, on the tiny DeepSeek-V2 golden models
// (V2-Lite style and V2 style with q LoRA) at tp 1, 2, 4 and tp=4 with dcp=2 (the log-sum-exp
// combine over the latent path). A decode step with no observer takes the latent path; a passive
// observer (it sees every port and changes nothing) keeps the expanded one. Checked: one decode
// step of two requests of different lengths, by hand-built batches, and a whole generation (8
// steps) against the expanded generation and transformers' golden logits, in fp32 (on the GPU
// from CUDA graphs where the group records).
#include <QtTest>

#include <ATen/ATen.h>

#include <mutex>

#include "common/golden_engine.h"
#include "common/tensor_checks.h"
#include "common/test_support.h"
#include "core/engine/engine.h"
#include "core/engine/generation.h"
#include "core/engine/pipeline_step.h"
#include "core/engine/rank_context.h"
#include "core/host_tensor_conversion.h"
#include "core/model/layers/mla_attention.h"
#include "core/model/safetensors_file.h"

using namespace shardscope;

namespace {

// Sees every port and changes nothing: the model runs as under a trace.
class PassiveObserver : public PortObserver {
 public:
  void visit(const Module&, PortRole, PortValue&, const ForwardBatch&) override {}
};

const std::vector<std::vector<int64_t>> kPrompts = {{3, 17, 42, 99, 123, 200, 7}, {5, 9, 240}};
const std::vector<int64_t> kNext = {11, 57};  // each request's decode token

// Prefills kPrompts into a fresh cache (expanded path), then runs one decode step of both requests
// as the generation loop builds it: logits [2, V] on the sampler, undefined elsewhere. `observer`
// null: the latent path; otherwise the expanded one. `swapSlots` puts request i in cache row 1 - i
// (the slots are gathered, not read as a view).
at::Tensor decodeStepLogits(RankContext& ctx, PortObserver* observer, bool swapSlots) {
  const ModelConfig& c = ctx.model.config();
  const KvCacheLayout layout = ctx.model.kvCacheLayout();
  const int64_t capacity = 16, R = 2;
  KvCache cache(c.numLayers, layout.localCapacity(capacity), layout.heads, layout.headDim,
                at::TensorOptions().dtype(ctx.dtype).device(ctx.device), R, layout.parts);
  const std::vector<int64_t> slots =
      swapSlots ? std::vector<int64_t>{1, 0} : std::vector<int64_t>{0, 1};
  std::vector<int64_t> ids, positions;
  std::vector<SequenceSpan> spans;
  for (int64_t i = 0; i < R; ++i) {
    const auto& p = kPrompts[size_t(i)];
    spans.push_back({int64_t(ids.size()), int64_t(p.size()), 0, &cache, i, slots[size_t(i)]});
    for (size_t t = 0; t < p.size(); ++t) positions.push_back(int64_t(t));
    ids.insert(ids.end(), p.begin(), p.end());
  }
  const auto onDevice = [&](const std::vector<int64_t>& v) {
    return at::tensor(v, at::kLong).to(ctx.device);
  };
  ForwardBatch prefill{ctx.group, onDevice(positions), spans, nullptr, 0, {}, {}};
  runStages(ctx, onDevice(ids), prefill, [&](const at::Tensor& h) { return h; });

  ForwardBatch decode{ctx.group, onDevice({7, 3}), {}, observer, 1, {}, {}};
  for (int64_t i = 0; i < R; ++i) {
    decode.spans.push_back(
        {i, 1, int64_t(kPrompts[size_t(i)].size()), &cache, i, slots[size_t(i)]});
  }
  decode.decodeSlots = onDevice(slots);
  decode.decodeSlotsInOrder = !swapSlots;
  decode.decodeSpan = capacity;
  if ((observer == nullptr) != MLAAttention::absorbs(decode))
    throw Error("the test's decode batch does not select the path it means to test");
  at::Tensor logits = runStages(ctx, onDevice(kNext), decode,
                                [&](const at::Tensor& h) { return ctx.model.logits(h, decode); });
  return ctx.isSampler() ? logits.to(at::kCPU, at::kFloat) : at::Tensor();
}

struct Golden {
  std::vector<int64_t> inputIds, greedy;
  at::Tensor decode;  // [8, V]
};

Golden loadGolden(const std::string& model) {
  SafetensorsFile f(test::goldenModel(model) / "golden.safetensors");
  const auto get = [&](const char* n) { return f.view(f.entry(n)).clone(); };
  const auto ids = [](const at::Tensor& t) {
    return std::vector<int64_t>(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + t.numel());
  };
  return {ids(get("input_ids")), ids(get("greedy_ids")), get("decode_logits")};
}

}  // namespace

class TestMlaAbsorbed : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void latentEqualsExpanded_data() { rows(); }
  // One decode step of two requests (lengths 7 and 3, so the masks differ; cache rows in order and
  // swapped): the latent path's logits are the expanded path's.
  void latentEqualsExpanded() {
    QFETCH(QString, model);
    QFETCH(int, tp);
    QFETCH(int, dcp);
    if (test::backend() == "nccl" && int(at::getNumGPUs()) < tp)
      QSKIP("NCCL needs one GPU per rank");
    Engine engine(options(model, tp, dcp));
    for (bool swap : {false, true}) {
      std::mutex m;
      at::Tensor latent, expanded;
      PassiveObserver passive;
      engine
          .submit([&](RankContext& ctx) {
            at::Tensor a = decodeStepLogits(ctx, nullptr, swap);
            at::Tensor b = decodeStepLogits(ctx, &passive, swap);
            if (!a.defined()) return;
            std::lock_guard lock(m);
            latent = a;
            expanded = b;
          })
          .wait();
      QCOMPARE(latent.sizes().vec(), expanded.sizes().vec());
      const double err = test::maxRelativeError(latent, expanded);
      QVERIFY2(err <= 1e-5, ("latent against expanded: relative error " + std::to_string(err) +
                             (swap ? " (slots swapped)" : ""))
                                .c_str());
    }
  }

  void generationMatchesExpandedAndTransformers_data() { rows(); }
  // A whole greedy generation: without an observer (every decode step in the latent space)
  // against the same generation under a passive observer (expanded) and against transformers.
  void generationMatchesExpandedAndTransformers() {
    QFETCH(QString, model);
    QFETCH(int, tp);
    QFETCH(int, dcp);
    if (test::backend() == "nccl" && int(at::getNumGPUs()) < tp)
      QSKIP("NCCL needs one GPU per rank");
    const Golden g = loadGolden(model.toStdString());
    Engine engine(options(model, tp, dcp));
    GenerateRequest r;
    r.prompts = {g.inputIds};
    r.sampling.maxTokens = int64_t(g.greedy.size());
    r.sampling.ignoreEos = true;
    r.returnLogits = true;
    const GenerateResult latent = Engine::generateResult(engine.generate(r));
    GenerateResult expanded;
    PassiveObserver passive;
    engine
        .submit([&](RankContext& ctx) {
          runGeneration(ctx, r, ctx.fillsResult() ? &expanded : nullptr, &passive);
        })
        .wait();
    // On the GPU the latent decode is recorded in CUDA graphs where the group can be (one rank,
    // or NCCL): the graphs' steps are the ones compared.
    if (test::device() == "cuda" && (tp == 1 || test::backend() == "nccl"))
      QVERIFY2(latent.graphLayers > 0, "no decoder layer ran from a CUDA graph");
    QCOMPARE(latent.outputs[0].tokenIds, g.greedy);
    QCOMPARE(expanded.outputs[0].tokenIds, g.greedy);
    const at::Tensor a = fromHostFloat(latent.outputs[0].logits);
    const at::Tensor b = fromHostFloat(expanded.outputs[0].logits);
    const double againstExpanded = test::maxRelativeError(a, b);
    const double againstHf = test::maxRelativeError(a.narrow(0, 1, g.decode.size(0)), g.decode);
    QVERIFY2(againstExpanded <= 1e-5,
             ("latent against expanded: " + std::to_string(againstExpanded)).c_str());
    QVERIFY2(againstHf <= 1e-4,
             ("latent against transformers: " + std::to_string(againstHf)).c_str());
    qInfo("%s tp=%d dcp=%d: latent vs expanded %.2e, vs transformers %.2e", qPrintable(model), tp,
          dcp, againstExpanded, againstHf);
  }

  // The path choice itself: only a decode batch with no observer takes the latent path.
  void absorbsOnlyUnobservedDecodeSteps() {
    EngineOptions o = options("deepseek-v2-lite-tiny", 1, 1);
    Engine engine(o);
    engine
        .submit([](RankContext& ctx) {
          PassiveObserver passive;
          ForwardBatch b{ctx.group, at::zeros({1}, at::kLong), {}, nullptr, 0, {}, {}};
          if (MLAAttention::absorbs(b)) throw Error("a prefill took the latent path");
          b.decodeSlots = at::zeros({1}, at::kLong);
          if (!MLAAttention::absorbs(b)) throw Error("an unobserved decode stayed expanded");
          b.observer = &passive;
          if (MLAAttention::absorbs(b)) throw Error("an observed decode took the latent path");
        })
        .wait();
  }

 private:
  static void rows() {
    QTest::addColumn<QString>("model");
    QTest::addColumn<int>("tp");
    QTest::addColumn<int>("dcp");
    for (const QString m : {"deepseek-v2-lite-tiny", "deepseek-v2-tiny"}) {
      for (int tp : {1, 2, 4})
        QTest::newRow(qPrintable(m + "_tp" + QString::number(tp))) << m << tp << 1;
      QTest::newRow(qPrintable(m + "_tp4_dcp2")) << m << 4 << 2;
    }
  }

  static EngineOptions options(const QString& model, int tp, int dcp) {
    EngineOptions o = test::goldenEngineOptions(model.toStdString(), tp);
    o.dcp = dcp;
    return o;
  }
};

QTEST_GUILESS_MAIN(TestMlaAbsorbed)
#include "tst_mla_absorbed.moc"
