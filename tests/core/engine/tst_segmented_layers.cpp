// A layer a trace needs replays as CUDA graph segments cut at its ports (SegmentedLayer, issue
// 15 target 3) when its observer says which ports it waits on: the ports it reads see the values
// an eager layer shows them, a write lands as it does eagerly, the ports nobody waits on are
// reported passed, and every step's ids and logits equal enforce_eager's. A layer whose ports
// inside attention nobody waits on replays its fused recording (attention's fused decode path);
// a read inside attention gets the module-by-module one. On the GPU only (the CPU has no graphs):
// one GPU at tp=1 and, over NCCL, one GPU per rank at tp=2. The tiny DeepSeek-V2 (MLA, MoE) and
// Qwen3-MoE rows check that other families' observed decode steps replay too: nothing in a
// recorded segment may depend on the step's host-side positions (DeepSeek's expanded attention
// once did, and replayed the recording step's cache slots).
#include <QtTest>

#include <memory>
#include <mutex>
#include <string>

#include "common/golden_engine.h"
#include "common/tensor_checks.h"
#include "common/test_support.h"
#include "core/engine/engine.h"
#include "core/engine/generation.h"
#include "core/engine/rank_context.h"
#include "core/host_tensor_conversion.h"
#include "core/model/module.h"
#include "core/model/port_observer.h"
#include "core/model/tokenizer.h"

using namespace shardscope;

namespace {

constexpr const char* kWrite = "model.model.layers[2].mlp";

// Reads the input of module `read` of layer 1 at every step and zeroes layer 2's MLP output at
// even steps; needs layers 1 and 2 and says which ports it waits on. Counts the ports a replayer
// passed.
class ReadsAndWrites : public PortObserver {
 public:
  explicit ReadsAndWrites(std::string read) : read_(std::move(read)) {}
  std::vector<at::Tensor> reads;
  int64_t passed = 0;

  void visit(const Module& m, PortRole role, PortValue& v, const ForwardBatch& b) override {
    if (reads_(m, role)) reads.push_back(v.items[0].to(at::kCPU));
    if (!writes_(m, role, b.step)) return;
    v.items[0].zero_();
    v.written = true;
  }
  bool tellsPortWaits() const override { return true; }
  bool waitsOn(const Module& m, PortRole role, int64_t step) const override {
    return reads_(m, role) || writes_(m, role, step);
  }
  void portPassed(const Module&, PortRole, const ForwardBatch&) override { ++passed; }
  int64_t firstLayerNeeded(int64_t step, int64_t numLayers) const override {
    if (step != step_) step_ = step, through_ = 0;
    return through_ <= 1 ? 1 : through_ <= 2 ? 2 : numLayers;
  }
  void layersReplayed(int64_t, int64_t end, const ForwardBatch& b) override {
    firstLayerNeeded(b.step, 0);
    through_ = std::max(through_, end);
  }

 private:
  bool reads_(const Module& m, PortRole role) const {
    return role == PortRole::Input && m.path() == read_;
  }
  static bool writes_(const Module& m, PortRole role, int64_t step) {
    return role == PortRole::Output && step % 2 == 0 && m.path() == kWrite;
  }
  std::string read_;
  mutable int64_t step_ = -1;
  mutable int64_t through_ = 0;  // layers passed in this step
};

struct Outcome {
  GenerateResult result;
  std::vector<at::Tensor> reads;  // rank 0's
  int64_t passed = 0;
};

Outcome generate(Engine& e, bool observe, const std::string& read) {
  GenerateRequest r;
  // The golden models have no tokenizer: ids of the same length.
  r.prompts = {e.tokenizer() ? e.tokenizer()->encode("The capital of France is")
                             : std::vector<int64_t>{17, 3, 101, 64, 9}};
  r.sampling.maxTokens = 6;
  r.sampling.ignoreEos = true;
  r.returnLogits = true;
  auto out = std::make_shared<Outcome>();
  JobHandle h = e.submit([&r, out, observe, read](RankContext& ctx) {
    ReadsAndWrites observer(read);
    runGeneration(ctx, r, ctx.rank == 0 ? &out->result : nullptr, observe ? &observer : nullptr);
    if (ctx.rank != 0) return;
    out->reads = observer.reads;
    out->passed = observer.passed;
  });
  h.wait();
  return *out;
}

// `model`: a golden model's folder name, or empty for the demo model.
EngineOptions options(const std::string& model, int tp, bool graphs) {
  EngineOptions o;
  if (!model.empty()) o.model = test::goldenModel(model).string();
  o.tp = tp;
  o.device = DeviceKind::Cuda;
  o.dtype = DType::F32;
  o.backend = tp > 1 ? GroupBackend::Nccl : GroupBackend::Local;
  o.cudaGraphs = graphs;
  return o;
}

}  // namespace

class TestSegmentedLayers : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void readsAndWritesMatchEagerLayers_data() {
    QTest::addColumn<QString>("model");
    QTest::addColumn<int>("tp");
    QTest::addColumn<QString>("read");
    // Layers a decode step replays from fused recordings: 2 (both), 1 (layer 2), -1 not checked
    // (a DeepSeek layer has no fused attention).
    QTest::addColumn<int>("fused");
    const QString oProj = "model.model.layers[1].self_attn.o_proj";
    const QString attn = "model.model.layers[1].self_attn.attn";
    const QString mla = "model.model.layers[1].self_attn.mla_attn";
    const QString deepseek = "deepseek-v2-lite-tiny";
    QTest::newRow("tp=1, o_proj") << QString() << 1 << oProj << 2;
    QTest::newRow("tp=1, inside attention") << QString() << 1 << attn << 1;
    QTest::newRow("tp=2 over NCCL, o_proj") << QString() << 2 << oProj << 2;
    QTest::newRow("tp=2 over NCCL, inside attention") << QString() << 2 << attn << 1;
    QTest::newRow("DeepSeek tp=1, o_proj") << deepseek << 1 << oProj << -1;
    QTest::newRow("DeepSeek tp=1, inside attention") << deepseek << 1 << mla << -1;
    QTest::newRow("DeepSeek tp=2 over NCCL, o_proj") << deepseek << 2 << oProj << -1;
    const QString moe = "qwen3-moe-tiny", experts = "model.model.layers[2].mlp.experts";
    QTest::newRow("Qwen3-MoE tp=1, o_proj") << moe << 1 << oProj << -1;
    QTest::newRow("Qwen3-MoE tp=1, experts") << moe << 1 << experts << -1;
    QTest::newRow("Qwen3-MoE tp=2 over NCCL, experts") << moe << 2 << experts << -1;
  }
  void readsAndWritesMatchEagerLayers() {
    QFETCH(QString, model);
    QFETCH(int, tp);
    QFETCH(QString, read);
    QFETCH(int, fused);
    if (test::device() != "cuda") QSKIP("CUDA graphs need the GPU (SHARDSCOPE_TEST_DEVICE=cuda)");
    if (int(at::getNumGPUs()) < tp) QSKIP("needs a GPU per rank");
    Engine graphs(options(model.toStdString(), tp, true));
    Engine eager(options(model.toStdString(), tp, false));
    const std::string path = read.toStdString();
    const Outcome plain = generate(graphs, false, path);
    const Outcome a = generate(graphs, true, path);
    const Outcome again = generate(graphs, true, path);  // the recorded segments, replayed
    const Outcome b = generate(eager, true, path);
    const int64_t steps = a.result.steps;
    QCOMPARE(steps, int64_t(6));
    QCOMPARE(a.result.segmentedLayers, 2 * steps);  // layers 1 and 2 at every step
    // Decode steps only (the prefill's attention has no fused path): layer 2 always, layer 1 too
    // unless the read is inside its attention.
    const int64_t decodeSteps = steps - 1;
    if (fused >= 0) QCOMPARE(a.result.segmentedFusedLayers, fused * decodeSteps);
    QCOMPARE(a.result.graphLayers, steps * graphs.info().numLayers);
    QCOMPARE(b.result.graphLayers, int64_t(0));
    QVERIFY(a.passed > 0);  // the ports nobody waited on
    QCOMPARE(a.reads.size(), size_t(steps));
    QCOMPARE(b.reads.size(), size_t(steps));
    for (size_t s = 0; s < a.reads.size(); ++s) {
      QVERIFY2(test::closeToScale(a.reads[s], b.reads[s]),
               test::closeToScaleMessage(a.reads[s], b.reads[s]).c_str());
      QVERIFY(at::equal(again.reads[s], a.reads[s]));
    }
    QCOMPARE(a.result.outputs[0].tokenIds, b.result.outputs[0].tokenIds);
    const at::Tensor x = fromHostFloat(a.result.outputs[0].logits);
    const at::Tensor y = fromHostFloat(b.result.outputs[0].logits);
    QVERIFY2(test::closeToScale(x, y), test::closeToScaleMessage(x, y).c_str());
    QVERIFY(at::equal(fromHostFloat(again.result.outputs[0].logits), x));
    // The write had an effect: the first step's logits differ from a run nobody observes.
    const at::Tensor p = fromHostFloat(plain.result.outputs[0].logits);
    QVERIFY(!test::closeToScale(x.narrow(0, 0, 1), p.narrow(0, 0, 1)));
  }
};

QTEST_GUILESS_MAIN(TestSegmentedLayers)
#include "tst_segmented_layers.moc"
