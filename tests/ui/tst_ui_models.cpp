// The GUI's plain parts: the module tree and session log models under QAbstractItemModelTester,
// the numbers the views draw (softmax, top-k, per-head norms, attention patterns), and the
// scripts the GUI builds (their text; running them is tst_main_window's job).
#include <QAbstractItemModelTester>
#include <QtTest>
#include <cmath>

#include "ui/module_tree_model.h"
#include "ui/result_math.h"
#include "ui/script_builder.h"
#include "ui/session_log_model.h"

using namespace shardscope;
using namespace shardscope::ui;

namespace {

ModelInfo smallModel() {
  ModelInfo m;
  m.spec = "demo";
  m.dtype = "float32";
  m.device = "cpu";
  m.tp = 2;
  m.numLayers = 2;
  m.numHeads = 4;
  m.numKvHeads = 2;
  m.headDim = 8;
  m.modules = {{"model", "model", "Qwen3ForCausalLM", 0, 0, {}, {}},
               {"model.model", "model", "Qwen3Model", 1, 0, {}, {}},
               {"model.model.layers[0]", "[0]", "Qwen3DecoderLayer", 2, 0, {}, {}},
               {"model.model.layers[0].self_attn.o_proj",
                "o_proj",
                "RowParallelLinear",
                3,
                0,
                {},
                {{"weight", {16, 16}, {16, 32}}}},
               {"model.model.layers[1]", "[1]", "Qwen3DecoderLayer", 2, 0, {}, {}}};
  return m;
}

HostTensor floats(std::vector<int64_t> shape, const std::vector<float>& values) {
  HostTensor t;
  t.shape = std::move(shape);
  t.bytes.resize(values.size() * 4);
  std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  return t;
}

}  // namespace

class TestUiModels : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void moduleTreeModel() {
    ModuleTreeModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    const std::vector<PortShape> shapes = {
        {"model.model.layers[0].self_attn.o_proj", "input", "head", {{5, 16}}, {{5, 32}}, false},
        {"model.model.layers[0].self_attn.o_proj",
         "output",
         "partial",
         {{5, 16}},
         {{5, 16}},
         false},
        {"model.model.layers[0]", "output", "whole", {{5, 16}, {5, 16}}, {{5, 16}, {5, 16}}, true}};
    model.setModel(smallModel(), shapes);
    QCOMPARE(model.rowCount(), 1);
    const QModelIndex port = model.indexOfPort("model.model.layers[0].self_attn.o_proj", "input");
    QVERIFY(port.isValid());
    QCOMPARE(model.data(port).toString(), QString(".input"));
    QCOMPARE(model.data(port.siblingAtColumn(ModuleTreeModel::ShapeColumn)).toString(),
             QString("[5, 32]"));
    QCOMPARE(model.data(port.siblingAtColumn(ModuleTreeModel::KindColumn)).toString(),
             QString("head"));
    QVERIFY(model.data(port, Qt::ToolTipRole).toString().contains("rank 0 holds [5, 16]"));
    const QModelIndex oproj = model.indexOfModule("model.model.layers[0].self_attn.o_proj");
    QVERIFY(model.data(oproj, Qt::ToolTipRole)
                .toString()
                .contains(".weight: shard [16, 16] of [16, 32]"));
    PortRef ref;
    std::string kind;
    QVERIFY(model.portAt(port, &ref, &kind));
    QCOMPARE(QString::fromStdString(ref.module + "." + ref.port),
             QString("model.model.layers[0].self_attn.o_proj.input"));
    QVERIFY(!model.portAt(oproj, &ref));
    const QModelIndex layerOut = model.indexOfPort("model.model.layers[0]", "output");
    QVERIFY(model.portAt(layerOut, &ref));
    QVERIFY(ref.tuple);
    QCOMPARE(model.data(layerOut.siblingAtColumn(1)).toString(), QString("([5, 16], [5, 16])"));
    model.setModel(ModelInfo{}, {});
    QCOMPARE(model.rowCount(), 0);
  }

  void sessionLogModel() {
    SessionLogModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    store::RunSummary a, b;
    a.id = 3;
    a.title = "Read x";
    a.status = "done";
    a.model = "demo";
    a.tp = 2;
    b.id = 7;
    b.title = "Zero heads";
    b.status = "failed";
    b.error = "gui.py:3:5: boom";
    model.setRuns({a, b});
    QCOMPARE(model.rowCount(), 2);
    QCOMPARE(model.rowOfRun(7), 1);
    QCOMPARE(model.data(model.index(0, SessionLogModel::ModelColumn)).toString(),
             QString("demo tp=2"));
    QCOMPARE(model.data(model.index(1, SessionLogModel::TitleColumn), Qt::ToolTipRole).toString(),
             QString("gui.py:3:5: boom"));
    // Trace time: absent before schema 3 ("-"), ms below a second, s above.
    QCOMPARE(model.data(model.index(1, SessionLogModel::TraceTimeColumn)).toString(), QString("-"));
    a.traceSeconds = 0.0412;
    a.steps = 3;
    b.traceSeconds = 2.5;
    b.steps = 1;
    model.setRuns({a, b});
    QCOMPARE(model.data(model.index(0, SessionLogModel::TraceTimeColumn)).toString(),
             QString("41.2 ms, 3 steps"));
    QCOMPARE(model.data(model.index(1, SessionLogModel::TraceTimeColumn)).toString(),
             QString("2.50 s, 1 step"));
    QCOMPARE(model.headerData(SessionLogModel::TraceTimeColumn, Qt::Horizontal).toString(),
             QString("Trace time"));
    // The status bar's text for a finished run: its traces summed, untimed ones left out.
    trace::RunResult result;
    result.traces.resize(3);
    result.traces[0].timing = trace::TraceTiming{0.5, 4};
    result.traces[2].timing = trace::TraceTiming{0.75, 6};
    QCOMPARE(traceTimeText(result), QString("1.25 s, 10 steps"));
    QCOMPARE(traceTimeText(trace::RunResult{}), QString("-"));
  }

  void resultMath() {
    const auto p = softmax({1.0, 2.0, 3.0});
    QCOMPARE(p.size(), size_t(3));
    QVERIFY(std::abs(p[0] + p[1] + p[2] - 1.0) < 1e-12);
    QVERIFY(std::abs(p[2] / p[1] - std::exp(1.0)) < 1e-9);
    const auto top = topK({0.1, 0.5, 0.2, 0.9}, 2);
    QCOMPARE(top.size(), size_t(2));
    QCOMPARE(top[0].first, int64_t(3));
    QCOMPARE(top[1].first, int64_t(1));
    const Matrix m = asMatrix(floats({2, 4}, {3, 4, 0, 0, 1, 0, 0, 2}));
    QCOMPARE(m.rows, int64_t(2));
    const Matrix norms = perHeadNorms(m, 2);
    QCOMPARE(norms.at(0, 0), 5.0);
    QCOMPARE(norms.at(0, 1), 0.0);
    QCOMPARE(norms.at(1, 1), 2.0);
    QCOMPARE(rowNorms(m)[0], 5.0);
    const Matrix q = asMatrix(floats({3, 2}, {1, 0, 0, 1, 1, 1}));
    const Matrix k = asMatrix(floats({3, 2}, {1, 0, 0, 1, 2, 2}));
    const Matrix a = attentionPattern(q, k);
    QCOMPARE(a.rows, int64_t(3));
    QCOMPARE(a.at(0, 0), 1.0);
    QCOMPARE(a.at(0, 1), 0.0);  // causal
    const double s = 1 / std::sqrt(2.0);
    const double e0 = std::exp(1 * s), e1 = std::exp(1 * s), e2 = std::exp(4 * s);
    QVERIFY(std::abs(a.at(2, 2) - e2 / (e0 + e1 + e2)) < 1e-12);
    QVERIFY(std::abs(a.at(1, 0) + a.at(1, 1) - 1) < 1e-12);
  }

  void scriptsNameWhatTheyDo() {
    const ModelInfo m = smallModel();
    const ScriptBuilder b(m);
    GenerationSettings g;
    g.prompts = {"Say \"hi\"", "second"};
    g.maxTokens = 3;
    const std::string read = b.readPort({"model.model.layers[0]", "output", true}, 2, g);
    QVERIFY(QString::fromStdString(read).startsWith(
        "model = VLLM(\"demo\", tensor_parallel_size=2, dtype=\"float32\", device=\"cpu\")\n"));
    QVERIFY(read.find("with tracer.invoke(\"Say \\\"hi\\\"\"):") != std::string::npos);
    QVERIFY(read.find("for step in tracer.iter[2]:") != std::string::npos);
    QVERIFY(read.find("value_1 = model.model.layers[0].output[0].save()") != std::string::npos);
    const std::string zero = b.zeroHeads({{0, {1, 3}}}, g);
    QVERIFY(zero.find("model.model.layers[0].self_attn.o_proj.head(z, 1)[:] = 0") !=
            std::string::npos);
    QVERIFY(zero.find("model.model.layers[0].self_attn.o_proj.head(z, 3)[:] = 0") !=
            std::string::npos);
    const std::string sweep = b.sweepLayer(1, 42, g);
    QVERIFY(sweep.find("target = 42") != std::string::npos);
    QVERIFY(sweep.find("head_3 = model.logits.softmax(-1)[0, target].save()") != std::string::npos);
    QVERIFY(sweep.find("head_4") == std::string::npos);
    // tp=2 with 2 KV heads: head 3 reads KV head 1; at tp=4 the gathered k holds 4 slots.
    QVERIFY(b.attentionPattern(0, 3, g).find("qk[1][:, 1 * d:2 * d]") != std::string::npos);
    ModelInfo wide = m;
    wide.tp = 4;
    QVERIFY(ScriptBuilder(wide).attentionPattern(0, 3, g).find("qk[1][:, 3 * d:4 * d]") !=
            std::string::npos);
  }
};

QTEST_GUILESS_MAIN(TestUiModels)
#include "tst_ui_models.moc"
