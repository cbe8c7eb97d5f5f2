// Qwen3-MoE under traces (TRACE.md, SPEC section 9), on the tiny random model of
// tests/golden/qwen3_moe/make_golden.py (8 experts, top-2, layer 1 dense) through local process
// groups, in both expert layouts: the router's logits (mlp.gate, replicated) are identical on every
// rank and equal tp=1's; the experts' output (mlp.experts, a per-rank partial sum) reads whole and
// equal to tp=1's; a write to it lands once (divided by the group size before the block's
// all-reduce); ablating an expert through the router equals transformers with that expert's logit
// at -inf; expert parallelism refuses an expert count the tp does not divide, naming the sizes
// that work; `inspect` shows the router and experts with their shard kinds.
#include <QtTest>

#include <ATen/ATen.h>

#include <fstream>

#include "common/script_run.h"
#include "common/tensor_checks.h"
#include "common/test_support.h"
#include "core/engine/engine.h"
#include "core/engine/rank_context.h"
#include "core/error.h"
#include "core/host_tensor_conversion.h"
#include "core/model/port_observer.h"
#include "core/model/safetensors_file.h"
#include "core/trace/script_runner.h"

using namespace shardscope;

namespace {

const std::vector<int64_t> kPrompt = {3, 17, 42, 99, 123, 200, 7};
const char* kPromptText = "[3, 17, 42, 99, 123, 200, 7]";

using Run = test::ScriptRun;
using test::idList;

Run run(const std::string& body, int tp, bool expertParallel) {
  trace::RunOptions o;
  o.modelDirs["moe"] = test::goldenModel("qwen3-moe-tiny").string();
  o.tp = tp;
  o.expertParallel = expertParallel;
  o.device = test::deviceKind();
  o.dtype = DType::F32;
  o.backend = test::groupBackend();
  return test::runBody(o, "moe", body, "moe.py");
}

std::string layoutName(int tp, bool expertParallel) {
  return "tp=" + std::to_string(tp) + (expertParallel ? " expert parallel" : "");
}

// The golden file's tensors (the ablation reference among them).
at::Tensor golden(const char* name) {
  SafetensorsFile f(test::goldenModel("qwen3-moe-tiny") / "golden.safetensors");
  return f.view(f.entry(name)).clone();
}

// Records one module's output on every rank, as the rank holds it.
class OutputRecorder : public PortObserver {
 public:
  explicit OutputRecorder(std::string path) : path_(std::move(path)) {}
  void visit(const Module& m, PortRole role, PortValue& v, const ForwardBatch&) override {
    if (role == PortRole::Output && m.path() == path_) value = v.items[0].to(at::kCPU).clone();
  }
  at::Tensor value;

 private:
  std::string path_;
};

// One prefill of kPrompt with `path`'s output recorded on every rank.
std::vector<at::Tensor> outputPerRank(Engine& engine, const std::string& path) {
  auto out = std::make_shared<std::vector<at::Tensor>>(size_t(engine.info().tp));
  engine
      .submit([path, out](RankContext& ctx) {
        const auto& c = ctx.model.config();
        const int64_t n = int64_t(kPrompt.size());
        KvCache cache(c.numLayers, n, ctx.model.kvHeadsPerRank(), c.headDim,
                      at::TensorOptions().dtype(ctx.dtype).device(ctx.device));
        OutputRecorder rec(path);
        ForwardBatch batch{
            ctx.group, at::arange(n, at::kLong).to(ctx.device), {{0, n, 0, &cache}}, &rec, 0, {},
            {}};
        ctx.model.forward(at::tensor(kPrompt, at::kLong).to(ctx.device), batch);
        (*out)[size_t(ctx.rank)] = rec.value;
      })
      .wait();
  return *out;
}

EngineOptions options(int tp, bool expertParallel) {
  EngineOptions o;
  o.model = test::goldenModel("qwen3-moe-tiny").string();
  o.tp = tp;
  o.expertParallel = expertParallel;
  o.device = test::deviceKind();
  o.dtype = DType::F32;
  o.backend = test::groupBackend();
  return o;
}

std::string readsScript() {
  return std::string("moe = model.model.layers[2].mlp\n") + "with model.trace(" + kPromptText +
         "):\n"
         "    x = moe.input.clone()\n"
         "    called = moe(x).save()\n"
         "    router = moe.gate.output[0].clone().save()\n"
         "    experts = moe.experts.output.clone().save()\n"
         "    block = moe.output.clone().save()\n"
         "    logits = model.logits.save()\n";
}

std::string scaleScript() {
  return std::string("moe = model.model.layers[2].mlp\n") + "with model.trace(" + kPromptText +
         "):\n"
         "    moe.experts.output = moe.experts.output * 0.5\n"
         "    logits = model.logits.save()\n";
}

std::string ablationScript(int64_t layer, int64_t expert) {
  return std::string("with model.trace(") + kPromptText +
         ", temperature=0.0, max_tokens=9, ignore_eos=True) as tracer:\n"
         "    for i in tracer.iter[:]:\n"
         "        model.model.layers[" +
         std::to_string(layer) + "].mlp.gate.output[0][:, " + std::to_string(expert) +
         "] = float(\"-inf\")\n"
         "        if i == 0:\n"
         "            first = model.logits.clone().save()\n"
         "    out = tracer.result.save()\n"
         "print(out.outputs[0].token_ids)\n";
}

bool skipNccl(int tp) {
  return test::backend() == "nccl" && int(at::getNumGPUs()) < tp;
}

}  // namespace

class TestMoeTrace : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void layouts_data() {
    QTest::addColumn<int>("tp");
    QTest::addColumn<bool>("expertParallel");
    for (int tp : {2, 4}) {
      QTest::newRow(qPrintable("tp" + QString::number(tp))) << tp << false;
      QTest::newRow(qPrintable("ep_tp" + QString::number(tp))) << tp << true;
    }
  }

  // The router's output as every rank holds it: bit-identical across ranks, equal to tp=1's.
  void routerIdenticalOnEveryRank_data() { layouts_data(); }
  void routerIdenticalOnEveryRank() {
    QFETCH(int, tp);
    QFETCH(bool, expertParallel);
    if (skipNccl(tp)) QSKIP("NCCL needs one GPU per rank");
    const std::string gate = "model.model.layers[2].mlp.gate";
    Engine one(options(1, false));
    const at::Tensor ref = outputPerRank(one, gate)[0];
    QCOMPARE(ref.sizes().vec(), (std::vector<int64_t>{7, 8}));
    Engine many(options(tp, expertParallel));
    const auto ranks = outputPerRank(many, gate);
    for (const at::Tensor& r : ranks) QVERIFY(at::equal(r, ranks[0]));
    QVERIFY2(test::closeToScale(ranks[0], ref), test::closeToScaleMessage(ranks[0], ref).c_str());
    // The experts' output is a partial sum on each rank: the ranks' pieces differ and add up.
    const auto parts = outputPerRank(many, "model.model.layers[2].mlp.experts");
    const at::Tensor whole = outputPerRank(one, "model.model.layers[2].mlp.experts")[0];
    QVERIFY(!at::equal(parts[0], parts[1]));
    at::Tensor sum = at::zeros_like(parts[0]);
    for (const at::Tensor& p : parts) sum += p;
    QVERIFY2(test::closeToScale(sum, whole), test::closeToScaleMessage(sum, whole).c_str());
  }

  // Reads through a trace: router, experts (all-reduced) and the block equal tp=1's; the
  // experts' whole output is the block's output, and so is the block called on its input.
  void readsEqualTp1_data() { layouts_data(); }
  void readsEqualTp1() {
    QFETCH(int, tp);
    QFETCH(bool, expertParallel);
    if (skipNccl(tp)) QSKIP("NCCL needs one GPU per rank");
    const Run one = run(readsScript(), 1, false);
    const Run many = run(readsScript(), tp, expertParallel);
    QVERIFY2(many.lines.empty(), many.lines.empty() ? "" : many.lines.back().c_str());
    QCOMPARE(many.tensor("router").sizes().vec(), (std::vector<int64_t>{7, 8}));
    QCOMPARE(many.tensor("experts").sizes().vec(), (std::vector<int64_t>{7, 64}));
    for (const char* name : {"router", "experts", "block", "called", "logits"}) {
      const at::Tensor got = many.tensor(name), ref = one.tensor(name);
      QVERIFY2(test::closeToScale(got, ref),
               (std::string(name) + " at " + layoutName(tp, expertParallel) + ": " +
                test::closeToScaleMessage(got, ref))
                   .c_str());
    }
    for (const char* name : {"experts", "called"}) {
      QVERIFY2(test::closeToScale(many.tensor(name), many.tensor("block")),
               test::closeToScaleMessage(many.tensor(name), many.tensor("block")).c_str());
    }
  }

  // experts.output * 0.5 written at tp ranks gives tp=1's logits: the block's all-reduce sums the
  // write once, not tp times (which would undo the scaling at tp=2).
  void scaledExpertsWriteLandsOnce_data() { layouts_data(); }
  void scaledExpertsWriteLandsOnce() {
    QFETCH(int, tp);
    QFETCH(bool, expertParallel);
    if (skipNccl(tp)) QSKIP("NCCL needs one GPU per rank");
    const at::Tensor plain = run(readsScript(), 1, false).tensor("logits");
    const at::Tensor ref = run(scaleScript(), 1, false).tensor("logits");
    QVERIFY2(!test::closeToScale(ref, plain), "scaling the experts' output changed nothing");
    const at::Tensor got = run(scaleScript(), tp, expertParallel).tensor("logits");
    QVERIFY2(test::closeToScale(got, ref), test::closeToScaleMessage(got, ref).c_str());
  }

  // mlp.gate.output[0][:, e] = -inf at every step equals transformers with expert e's router
  // logit at -inf in that layer (tests/golden/qwen3_moe/make_golden.py): the first step's logits
  // within 1e-4 relative error and the same greedy ids, at tp=1 and in both layouts at tp=2.
  void ablationEqualsTransformers_data() {
    QTest::addColumn<int>("tp");
    QTest::addColumn<bool>("expertParallel");
    QTest::newRow("tp1") << 1 << false;
    QTest::newRow("tp2") << 2 << false;
    QTest::newRow("ep_tp2") << 2 << true;
  }
  void ablationEqualsTransformers() {
    QFETCH(int, tp);
    QFETCH(bool, expertParallel);
    if (skipNccl(tp)) QSKIP("NCCL needs one GPU per rank");
    const int64_t layer = golden("ablation_layer").item<int64_t>();
    const int64_t expert = golden("ablation_expert").item<int64_t>();
    const at::Tensor refLogits = golden("ablation_prefill_logits")[-1];
    const at::Tensor refIds = golden("ablation_greedy_ids");
    const std::vector<int64_t> ids(refIds.data_ptr<int64_t>(),
                                   refIds.data_ptr<int64_t>() + refIds.numel());
    const at::Tensor plainIds = golden("greedy_ids");
    QVERIFY2(!at::equal(refIds, plainIds), "the reference ablation changes no token");

    const Run r = run(ablationScript(layer, expert), tp, expertParallel);
    QVERIFY(!r.lines.empty());
    QCOMPARE(idList(r.lines.back()), ids);
    const double err = test::maxRelativeError(r.tensor("first").reshape({-1}), refLogits);
    QVERIFY2(err <= 1e-4, ("ablated logits: relative error " + std::to_string(err)).c_str());
  }

  // enable_expert_parallel with a tp that does not divide the experts is refused with the sizes
  // that work; the default layout takes the same tp.
  void expertParallelRefusesIndivisibleExperts() {
    test::TempDir dir;
    const auto config = dir.path() / "config.json";
    std::ofstream(config) << R"({"model_type": "qwen3_moe", "vocab_size": 64, "hidden_size": 32,
      "intermediate_size": 64, "moe_intermediate_size": 16, "num_experts": 6,
      "num_experts_per_tok": 2, "num_hidden_layers": 1, "num_attention_heads": 4,
      "num_key_value_heads": 4, "head_dim": 8})";
    EngineOptions o;
    o.model = "random:" + config.string() + "@1";
    o.tp = 4;
    o.expertParallel = true;
    o.backend = GroupBackend::Local;
    const std::string expected =
        "enable_expert_parallel: tensor_parallel_size 4 does not divide num_experts (6); sizes "
        "that work for this model with expert parallelism: 1, 2";
    try {
      Engine refused(o);
      QFAIL("tp=4 with 6 experts under expert parallelism was accepted");
    } catch (const CheckpointError& e) {
      QVERIFY2(std::string(e.what()).find(expected) == 0, e.what());
    }
    // Through a script, the same refusal.
    trace::RunOptions ro;
    ro.modelDirs["six"] = o.model;
    ro.backend = GroupBackend::Local;
    ro.out = [](const std::string&) {};
    ro.note = [](const std::string&) {};
    trace::ScriptRunner runner(ro);
    try {
      runner.run(
          "model = VLLM(\"six\", tensor_parallel_size=4, enable_expert_parallel=True)\n"
          "with model.trace([1, 2]):\n"
          "    pass\n",
          "six.py");
      QFAIL("the script's expert-parallel model was accepted");
    } catch (const std::exception& e) {
      QVERIFY2(std::string(e.what()).find(expected) != std::string::npos, e.what());
    }
    o.expertParallel = false;
    Engine accepted(o);
    QCOMPARE(accepted.info().tp, 4);
  }

  // The module tree names the router and the experts with their shard kinds and each rank's
  // share of the expert weights.
  void inspectShowsRouterAndExperts_data() {
    QTest::addColumn<bool>("expertParallel");
    QTest::addColumn<QString>("w13");
    QTest::newRow("default") << false << "shard [8, 32, 64] of [8, 64, 64]";
    QTest::newRow("expert_parallel") << true << "shard [4, 64, 64] of [8, 64, 64]";
  }
  void inspectShowsRouterAndExperts() {
    QFETCH(bool, expertParallel);
    QFETCH(QString, w13);
    QStringList args = {
        "inspect", "--model", QString::fromStdString(test::goldenModel("qwen3-moe-tiny").string()),
        "--tp",    "2",       "--backend",
        "local"};
    if (expertParallel) args << "--enable-expert-parallel";
    QProcess p;
    p.start(SHARDSCOPE_CLI, args);
    QVERIFY(p.waitForFinished(120000));
    const QString out = QString::fromUtf8(p.readAllStandardOutput());
    QVERIFY2(p.exitCode() == 0, qPrintable(QString::fromUtf8(p.readAllStandardError())));
    const QStringList expected = {
        "model.model.layers[2].mlp  (Qwen3MoeSparseMoeBlock)",
        "model.model.layers[2].mlp.gate  (ReplicatedLinear)",
        ".output  [whole]  ([5, 8], None)",
        "model.model.layers[2].mlp.experts  (FusedMoE)",
        ".output  [partial]  [5, 64]",
        ".w13_weight  " + w13,
        "model.model.layers[1].mlp.gate_up_proj  (MergedColumnParallelLinear)"};
    for (const QString& e : expected) QVERIFY2(out.contains(e), qPrintable(e + "\n" + out));
  }
};

QTEST_GUILESS_MAIN(TestMoeTrace)
#include "tst_moe_trace.moc"
