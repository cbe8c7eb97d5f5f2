// The GUI's plain parts: the module tree and session log models under QAbstractItemModelTester,
// the numbers the views draw (softmax, top-k, per-head norms, attention patterns), and the
// scripts the GUI builds (their text; running them is tst_main_window's job).
#include <QAbstractItemModelTester>
#include <QtTest>
#include <cmath>

#include "common/test_support.h"
#include "core/engine/engine.h"
#include "core/engine/port_probe.h"
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
               {"model.model.layers[0]", "[0]", "Qwen3DecoderLayer", 2, 0, {}, {}, 0},
               {"model.model.layers[0].self_attn.o_proj",
                "o_proj",
                "RowParallelLinear",
                3,
                0,
                {},
                {{"weight", {16, 16}, {16, 32}}},
                0},
               {"model.model.layers[1]", "[1]", "Qwen3DecoderLayer", 2, 0, {}, {}, 1}};
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
    // The decoder layer of a module row and of its ports; -1 outside the layers.
    QCOMPARE(model.data(oproj, ModuleTreeModel::LayerRole).toInt(), 0);
    QCOMPARE(model.data(port, ModuleTreeModel::LayerRole).toInt(), 0);
    QCOMPARE(model.data(model.indexOfModule("model.model.layers[1]"), ModuleTreeModel::LayerRole)
                 .toInt(),
             1);
    QCOMPARE(model.data(model.indexOfModule("model.model"), ModuleTreeModel::LayerRole).toInt(),
             -1);
    model.setModel(ModelInfo{}, {});
    QCOMPARE(model.rowCount(), 0);
  }

  // DeepSeek-V2-Lite style at tp=4, dcp=2, the tree built as the GUI builds it (the engine's
  // modules and probePortShapes): the MLA and MoE modules with their classes, and their ports with
  // their shard kinds, the group-sharded q_proj's badge told apart from a whole value's.
  void moduleTreeShowsMlaAndMoe() {
    EngineOptions o;
    o.model = test::goldenModel("deepseek-v2-lite-tiny").string();
    o.tp = 4;
    o.dcp = 2;
    o.dtype = DType::F32;
    o.device = DeviceKind::Cpu;
    o.backend = GroupBackend::Local;
    Engine engine(o);
    ModuleTreeModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    model.setModel(engine.info(), probePortShapes(engine, {3, 17, 42, 99, 123}));
    const std::string layer = "model.model.layers[1].";
    const auto moduleKind = [&](const std::string& path) {
      const QModelIndex m = model.indexOfModule(layer + path);
      return m.isValid() ? model.data(m.siblingAtColumn(ModuleTreeModel::KindColumn)).toString()
                         : QString("(no row for " + QString::fromStdString(path) + ")");
    };
    const auto portKind = [&](const std::string& path, const std::string& port) {
      const QModelIndex p = model.indexOfPort(layer + path, port);
      return p.isValid()
                 ? model.data(p, ModuleTreeModel::ShardKindRole).toString()
                 : QString("(no row for " + QString::fromStdString(path + "." + port) + ")");
    };
    QCOMPARE(moduleKind("self_attn"), QString("DeepseekV2MLAAttention"));
    QCOMPARE(moduleKind("self_attn.q_proj"), QString("DCPGroupColumnParallelLinear"));
    QCOMPARE(portKind("self_attn.q_proj", "output"), QString("dcp-group"));
    QCOMPARE(moduleKind("self_attn.kv_a_proj_with_mqa"), QString("ReplicatedLinear"));
    QCOMPARE(moduleKind("self_attn.kv_b_proj"), QString("ColumnParallelLinear"));
    QCOMPARE(portKind("self_attn.kv_b_proj", "output"), QString("column"));
    QCOMPARE(moduleKind("self_attn.mla_attn"), QString("MLAAttention"));
    QCOMPARE(portKind("self_attn.mla_attn", "input"), QString("head"));
    QCOMPARE(portKind("self_attn.mla_attn", "output"), QString("head"));
    QCOMPARE(moduleKind("self_attn.o_proj"), QString("RowParallelLinear"));
    QCOMPARE(moduleKind("mlp"), QString("DeepseekV2MoE"));
    QCOMPARE(moduleKind("mlp.gate"), QString("ReplicatedLinear"));
    QCOMPARE(moduleKind("mlp.experts"), QString("FusedMoE"));
    QCOMPARE(portKind("mlp.experts", "output"), QString("partial"));
    QCOMPARE(portKind("mlp.shared_experts", "output"), QString("partial"));
    QCOMPARE(portKind("mlp", "output"), QString("whole"));
    const QModelIndex q = model.indexOfPort(layer + "self_attn.q_proj", "output");
    const QModelIndex whole = model.indexOfPort(layer + "mlp", "output");
    const auto badge = [&](const QModelIndex& i) {
      return model.data(i.siblingAtColumn(ModuleTreeModel::KindColumn), Qt::ForegroundRole)
          .value<QBrush>()
          .color();
    };
    QVERIFY(badge(q) != badge(whole));
    QVERIFY(model.data(q, Qt::ToolTipRole).toString().contains("dcp-group-sharded"));
  }

  void sessionLogModel() {
    SessionLogModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    store::RunSummary a, b;
    a.id = 3;
    a.title = "Read x";
    a.status = store::RunStatus::Done;
    a.model = "demo";
    a.tp = 2;
    b.id = 7;
    b.title = "Zero heads";
    b.status = store::RunStatus::Failed;
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
