// The MoE routing view's plain parts: the scripts it asks for (routing and expert ablation), the
// routing read back from a run's saved values, the sparse layers of a model, and the view itself
// (hover read-out, a click on a cell names its layer and top expert, the Route button).
// tst_main_window runs the scripts on a Qwen3-MoE model end to end.
#include <qcustomplot.h>
#include <QComboBox>
#include <QLayout>
#include <QMouseEvent>
#include <QPushButton>
#include <QSignalSpy>
#include <QtTest>
#include <cstring>

#include "ui/expert_chart.h"
#include "ui/expert_routing.h"
#include "ui/routing_view.h"
#include "ui/script_builder.h"

using namespace shardscope;
using namespace shardscope::ui;

namespace {

HostTensor tensor(DType dtype, std::vector<int64_t> shape, const std::vector<double>& values) {
  HostTensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.bytes.resize(values.size() * dtypeSize(dtype));
  for (size_t i = 0; i < values.size(); ++i) {
    if (dtype == DType::I64) {
      const int64_t v = int64_t(values[i]);
      std::memcpy(t.bytes.data() + i * 8, &v, 8);
    } else {
      const float v = float(values[i]);
      std::memcpy(t.bytes.data() + i * 4, &v, 4);
    }
  }
  return t;
}

// A routing run of 3 tokens, top-2, in layers 1 and 3 (saved as ScriptBuilder::routing names it).
trace::RunResult routingRun() {
  trace::RunResult r;
  r.traces.emplace_back();
  auto& values = r.traces.back().values;
  const auto add = [&](const std::string& name, HostTensor t) {
    trace::SavedValue v;
    v.name = name;
    v.tensor = std::move(t);
    values.push_back(v);
  };
  add("route_1[0]", tensor(DType::F32, {3, 2}, {0.7, 0.3, 0.6, 0.4, 0.9, 0.1}));
  add("route_1[1]", tensor(DType::I64, {3, 2}, {5, 1, 2, 0, 7, 5}));
  add("route_3[0]", tensor(DType::F32, {3, 2}, {0.5, 0.5, 0.8, 0.2, 0.55, 0.45}));
  add("route_3[1]", tensor(DType::I64, {3, 2}, {3, 4, 6, 1, 0, 2}));
  return r;
}

// Router probabilities over 8 experts for `routingRun`'s 3 tokens at one layer: the chosen experts
// (chosen[t]) get the given probabilities, the rest share what is left evenly.
HostTensor probabilities(const std::vector<std::vector<std::pair<int, double>>>& chosen) {
  std::vector<double> p;
  for (const auto& token : chosen) {
    std::vector<double> row(8, 0);
    double left = 1;
    for (const auto& [e, q] : token) left -= q;
    for (double& x : row) x = left / double(8 - token.size());
    for (const auto& [e, q] : token) row[size_t(e)] = q;
    p.insert(p.end(), row.begin(), row.end());
  }
  return tensor(DType::F32, {3, 8}, p);
}

// routingRun with router_probs_L saved, as ScriptBuilder::routing saves them.
trace::RunResult routingRunWithProbabilities() {
  trace::RunResult r = routingRun();
  const auto add = [&](const std::string& name, HostTensor t) {
    trace::SavedValue v;
    v.name = name;
    v.tensor = std::move(t);
    r.traces.back().values.push_back(v);
  };
  add("router_probs_1",
      probabilities({{{5, 0.35}, {1, 0.15}}, {{2, 0.3}, {0, 0.2}}, {{7, 0.45}, {5, 0.05}}}));
  add("router_probs_3",
      probabilities({{{3, 0.25}, {4, 0.25}}, {{6, 0.4}, {1, 0.1}}, {{0, 0.22}, {2, 0.18}}}));
  return r;
}

// Shows `view` as a window of its own and waits until it is exposed.
bool shown(RoutingView& view) {
  view.resize(600, 500);
  // Its minimum size settled before the window exists: a top-level's first show would otherwise
  // send the platform a size-hint change, which the offscreen platform warns about.
  view.layout()->activate();
  view.show();
  return QTest::qWaitForWindowExposed(&view);
}

QVector<double> keys(const QCPBars* bars) {
  QVector<double> out;
  for (auto it = bars->data()->constBegin(); it != bars->data()->constEnd(); ++it)
    out.push_back(it->key);
  return out;
}

double valueAt(const QCPBars* bars, double key) {
  const auto it = bars->data()->findBegin(key, false);
  return it == bars->data()->constEnd() || it->key != key ? -1 : it->value;
}

ModelInfo moeModel() {
  ModelInfo m;
  m.spec = "moe";
  m.dtype = "float32";
  m.device = "cpu";
  m.tp = 2;
  m.expertParallel = true;
  m.numLayers = 4;
  m.numExperts = 8;
  m.expertsPerToken = 2;
  m.modules = {{"model.model.layers[0].mlp", "mlp", "Qwen3MoeMLP", 3, 0, {}, {}, 0},
               {"model.model.layers[1].mlp.experts", "experts", "FusedMoE", 4, 0, {}, {}, 1},
               {"model.model.layers[3].mlp.experts", "experts", "FusedMoE", 4, 0, {}, {}, 3},
               {"model.model.layers[3].mlp.gate", "gate", "ReplicatedLinear", 4, 0, {}, {}, 3}};
  return m;
}

}  // namespace

class TestRoutingView : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void sparseLayersAreTheLayersWithExperts() {
    QCOMPARE(sparseLayers(moeModel()), (std::vector<int64_t>{1, 3}));
    ModelInfo dense;
    dense.modules = {{"model.model.layers[0].mlp", "mlp", "MLP", 3, 0, {}, {}, 0}};
    QVERIFY(sparseLayers(dense).empty());
  }

  void routingScriptSavesEachSparseLayersChoice() {
    const ModelInfo m = moeModel();
    GenerationSettings g;
    g.prompts = {"The capital of France is"};
    const std::string s = ScriptBuilder(m).routing({1, 3}, g);
    QVERIFY2(s.find("enable_expert_parallel=True") != std::string::npos, s.c_str());
    QVERIFY2(s.find("route_1 = model.model.layers[1].mlp.experts.select_experts("
                    "model.model.layers[1].mlp.gate.output[0]).save()") != std::string::npos,
             s.c_str());
    QVERIFY(s.find("route_3 = ") != std::string::npos);
    QVERIFY(s.find("route_0") == std::string::npos);
    QVERIFY2(s.find("router_probs_3 = model.model.layers[3].mlp.gate.output[0].float()"
                    ".softmax(-1).save()") != std::string::npos,
             s.c_str());
    QVERIFY(s.find("router_probs_0") == std::string::npos);
  }

  void ablationScriptSetsTheRouterLogitToMinusInfinity() {
    GenerationSettings g;
    g.prompts = {"Paris"};
    g.maxTokens = 4;
    const std::string s = ScriptBuilder(moeModel()).ablateExpert(3, 6, g);
    QVERIFY2(s.find("model.model.layers[3].mlp.gate.output[0][:, 6] = float(\"-inf\")") !=
                 std::string::npos,
             s.c_str());
    QVERIFY(s.find("baseline_logits = model.logits.save()") != std::string::npos);
    QVERIFY(s.find("ablated_logits = model.logits.save()") != std::string::npos);
  }

  void routingIsReadBackFromSavedValues() {
    const auto routing = expertRoutingOf(routingRun());
    QVERIFY(routing.has_value());
    QCOMPARE(routing->layers, (std::vector<int64_t>{1, 3}));
    QCOMPARE(routing->tokens, int64_t(3));
    QCOMPARE(routing->topK, int64_t(2));
    QCOMPARE(routing->expert(0, 2, 0), int64_t(7));
    QCOMPARE(routing->expert(1, 1, 1), int64_t(1));
    QCOMPARE(routing->weight(1, 0, 1), 0.5);
    QCOMPARE(maxExpert(*routing), int64_t(7));
    QVERIFY(!routing->hasProbabilities());  // this run saved none, as runs before them did
  }

  void probabilitiesAreReadBackWhenEveryLayerSavedThem() {
    const auto routing = expertRoutingOf(routingRunWithProbabilities());
    QVERIFY(routing.has_value());
    QVERIFY(routing->hasProbabilities());
    QCOMPARE(routing->numExperts, int64_t(8));
    QCOMPARE(float(routing->probability(0, 2, 7)), 0.45f);
    QCOMPARE(float(routing->probability(1, 1, 6)), 0.4f);
    QCOMPARE(float(routing->probability(1, 1, 2)), 0.5f / 6);
    QCOMPARE(float(routing->chosenMass(0, 0)), 0.5f);
    QCOMPARE(float(routing->chosenMass(1, 2)), 0.4f);

    trace::RunResult oneLayer = routingRunWithProbabilities();
    oneLayer.traces.back().values.pop_back();  // layer 3's are missing: none are shown
    QVERIFY(!expertRoutingOf(oneLayer)->hasProbabilities());
    trace::RunResult narrow = routingRunWithProbabilities();
    // 4 experts cannot hold the chosen id 7: not the routing's probabilities.
    narrow.traces.back().values.back().tensor =
        tensor(DType::F32, {3, 4}, std::vector<double>(12, 0.25));
    QVERIFY(!expertRoutingOf(narrow)->hasProbabilities());
    QVERIFY(expertRoutingOf(narrow).has_value());  // the choice itself still shows
  }

  void otherRunsHaveNoRouting() {
    trace::RunResult none;
    QVERIFY(!expertRoutingOf(none).has_value());
    trace::RunResult r = routingRun();
    r.traces.back().values[3].tensor = tensor(DType::I64, {2, 2}, {1, 2, 3, 4});  // 2 tokens
    QVERIFY(!expertRoutingOf(r).has_value());
  }

  void viewReadsOutAndClicksNameTheTopExpert() {
    RoutingView view;
    QVERIFY(shown(view));
    view.setRouting(*expertRoutingOf(routingRun()), {"The", " capital", " is"}, 8);
    QCOMPARE(view.readOut(0, 2), QString("layer 1, token ' is': expert 7 (0.90), 5 (0.10)"));
    QCOMPARE(view.readOut(1, 0), QString("layer 3, token 'The': expert 3 (0.50), 4 (0.50)"));
    QSignalSpy clicked(&view, &RoutingView::expertClicked);
    QTest::mouseClick(view.canvas(), Qt::LeftButton, {}, view.cellCentre(1, 1));
    QCOMPARE(clicked.count(), 1);
    QCOMPARE(clicked.at(0).at(0).toLongLong(), 3LL);  // layer 3
    QCOMPARE(clicked.at(0).at(1).toLongLong(), 6LL);  // its top expert for token 1
    QSignalSpy route(&view, &RoutingView::routeRequested);
    view.routeButton()->click();
    QCOMPARE(route.count(), 1);
    QVERIFY(
        view.chart()->chosenBars()->data()->isEmpty());  // no probabilities saved: an empty chart
    QVERIFY(view.chart()->otherBars()->data()->isEmpty());
    QVERIFY(view.chart()->title().contains("saved no router probabilities"));
  }

  void hoveringACellChartsItsRouterProbabilities() {
    RoutingView view;
    QVERIFY(shown(view));
    view.setRouting(*expertRoutingOf(routingRunWithProbabilities()), {"The", " capital", " is"}, 8);
    QCOMPARE(keys(view.chart()->chosenBars()), (QVector<double>{1, 5}));  // layer 1, token 0 first
    QCOMPARE(keys(view.chart()->otherBars()), (QVector<double>{0, 2, 3, 4, 6, 7}));

    QMouseEvent move(QEvent::MouseMove, QPointF(view.cellCentre(1, 1)),
                     view.canvas()->mapToGlobal(QPointF(view.cellCentre(1, 1))), Qt::NoButton,
                     Qt::NoButton, Qt::NoModifier);
    QCoreApplication::sendEvent(view.canvas(), &move);
    QCOMPARE(keys(view.chart()->chosenBars()),
             (QVector<double>{1, 6}));  // layer 3, token ' capital'
    QCOMPARE(float(valueAt(view.chart()->chosenBars(), 6)), 0.4f);
    QCOMPARE(float(valueAt(view.chart()->chosenBars(), 1)), 0.1f);
    QCOMPARE(float(valueAt(view.chart()->otherBars(), 0)), 0.5f / 6);
    QCOMPARE(valueAt(view.chart()->otherBars(), 6),
             -1.0);  // a chosen expert is not among the others
    const QString title = view.chart()->title();
    QVERIFY2(title.contains("layer 3") && title.contains("' capital'") &&
                 title.contains("the 2 chosen hold 0.50"),
             qPrintable(title));

    // A token's text is shown as it is, even one that looks like a placeholder.
    view.setRouting(*expertRoutingOf(routingRunWithProbabilities()), {"The", "%3%4", " is"}, 8);
    view.showCell(0, 1);
    QVERIFY2(view.chart()->title().contains("token '%3%4' (chosen in blue): the 2 chosen hold"),
             qPrintable(view.chart()->title()));
    QCOMPARE(view.readOut(0, 1), QString("layer 1, token '%3%4': expert 2 (0.60), 0 (0.40)"));

    view.setRouting(*expertRoutingOf(routingRun()), {"The", " capital", " is"}, 8);
    QVERIFY(view.chart()->chosenBars()->data()->isEmpty());
  }

  void theLoadChartCountsTheTokensOfEachExpert() {
    RoutingView view;
    QVERIFY(shown(view));
    // routingRun has no probabilities: the load needs none.
    view.setRouting(*expertRoutingOf(routingRun()), {"The", " capital", " is"}, 8);
    view.chartSelector()->setCurrentIndex(1);  // as the user picks "Layer: expert load"
    QCOMPARE(view.chartKind(), RoutingView::Chart::LayerLoad);
    // Layer 1 (row 0) chose {5, 1}, {2, 0}, {7, 5}: expert 5 twice, 3, 4 and 6 never.
    QCOMPARE(keys(view.chart()->chosenBars()), (QVector<double>{0, 1, 2, 3, 4, 5, 6, 7}));
    const QVector<double> load0 = {1, 1, 1, 0, 0, 2, 0, 1};
    for (int e = 0; e < 8; ++e) QCOMPARE(valueAt(view.chart()->chosenBars(), e), load0[e]);
    QVERIFY(view.chart()->otherBars()->data()->isEmpty());
    QVERIFY2(view.chart()->title().contains("Layer 1:") &&
                 view.chart()->title().contains("3 of 8 chosen by none, the busiest by 2"),
             qPrintable(view.chart()->title()));
    view.showCell(1, 2);  // layer 3: {3, 4}, {6, 1}, {0, 2}: every one once but 5 and 7
    const QVector<double> load1 = {1, 1, 1, 1, 1, 0, 1, 0};
    for (int e = 0; e < 8; ++e) QCOMPARE(valueAt(view.chart()->chosenBars(), e), load1[e]);
    // Routing again (the same layout) keeps the cell the chart shows.
    view.setRouting(*expertRoutingOf(routingRun()), {"The", " capital", " is"}, 8);
    QVERIFY2(view.chart()->title().startsWith("Layer 3:"), qPrintable(view.chart()->title()));
    // Back to the cell's probabilities, which this run did not save.
    view.setChart(RoutingView::Chart::CellProbabilities);
    QVERIFY(view.chart()->chosenBars()->data()->isEmpty());
    QVERIFY(view.chart()->title().contains("saved no router probabilities"));
  }

  void loadCountsOnlyExpertsInRange() {
    const ExpertRouting r = *expertRoutingOf(routingRun());
    QCOMPARE(r.load(0, 8), (std::vector<int64_t>{1, 1, 1, 0, 0, 2, 0, 1}));
    QCOMPARE(r.load(0, 4), (std::vector<int64_t>{1, 1, 1, 0}));  // 5 and 7 lie outside
  }
};

QTEST_MAIN(TestRoutingView)
#include "tst_routing_view.moc"
