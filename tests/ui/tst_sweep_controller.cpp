// The ablation sweep's controller without an engine: which layers the Sweep layers box names, the
// scripts a sweep emits, the greedy-token lookup before a sweep without a target (and what stops
// it), and the effects drawn from a layer's run. Running the scripts is tst_main_window's job.
#include <QSignalSpy>
#include <QtTest>
#include <cmath>
#include <cstring>

#include "ui/sweep_controller.h"

using namespace shardscope;
using namespace shardscope::ui;

namespace {

ModelInfo smallModel() {
  ModelInfo m;
  m.spec = "demo";
  m.dtype = "float32";
  m.device = "cpu";
  m.tp = 2;
  m.numLayers = 3;
  m.numHeads = 4;
  m.numKvHeads = 2;
  m.headDim = 8;
  return m;
}

trace::SavedValue floats(const std::string& name, std::vector<int64_t> shape,
                         const std::vector<float>& values) {
  trace::SavedValue v;
  v.name = name;
  v.tensor.shape = std::move(shape);
  v.tensor.bytes.resize(values.size() * 4);
  std::memcpy(v.tensor.bytes.data(), values.data(), v.tensor.bytes.size());
  return v;
}

trace::RunResult withValues(std::vector<trace::SavedValue> values) {
  trace::RunResult r;
  r.traces.emplace_back();
  r.traces.back().values = std::move(values);
  return r;
}

// What a finished Top-k run reports: step-0 logits whose largest entry is `greedy`.
std::shared_ptr<const RunOutcome> topKRun(int64_t greedy,
                                          store::RunStatus status = store::RunStatus::Done) {
  auto o = std::make_shared<RunOutcome>();
  o->title = "Top-k";
  o->view = store::RunView::of(store::RunView::Kind::TopK);
  o->status = status;
  std::vector<float> logits(6, 0.0f);
  logits[size_t(greedy)] = 5.0f;
  o->result = withValues({floats("logits_0", {1, 6}, logits)});
  return o;
}

// A sweep layer's run: baseline probability and each head's.
trace::RunResult layerRun(float baseline, const std::vector<float>& heads) {
  std::vector<trace::SavedValue> values = {floats("baseline", {1}, {baseline})};
  for (size_t h = 0; h < heads.size(); ++h)
    values.push_back(floats("head_" + std::to_string(h), {1}, {heads[h]}));
  return withValues(std::move(values));
}

std::vector<std::string> titles(const QSignalSpy& started) {
  std::vector<std::string> out;
  for (const auto& s : started.last().at(0).value<std::vector<ScriptRequest>>())
    out.push_back(s.title);
  return out;
}

}  // namespace

class TestSweepController : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void parsesLayers() {
    using V = std::vector<int64_t>;
    QCOMPARE(SweepController::parseLayers("0-2", 4), V({0, 1, 2}));
    QCOMPARE(SweepController::parseLayers("1, 3", 4), V({1, 3}));
    QCOMPARE(SweepController::parseLayers("", 4), V({0, 1, 2, 3}));  // was {0}
    QCOMPARE(SweepController::parseLayers("  ", 3), V({0, 1, 2}));
    QCOMPARE(SweepController::parseLayers("2-9", 4), V({2, 3}));
    QCOMPARE(SweepController::parseLayers("7", 4), V{});  // named, but past the model
    QCOMPARE(SweepController::parseLayers("", 0), V{});
  }

  void sweepWithTargetEmitsOneScriptALayer() {
    SweepController c;
    QSignalSpy started(&c, &SweepController::started);
    QSignalSpy needed(&c, &SweepController::targetNeeded);
    c.start({0, 1}, 42, {});  // no model yet: nothing to build scripts for
    QCOMPARE(started.count(), 0);
    c.setModel(smallModel());
    c.start({}, 42, {});
    QCOMPARE(started.count(), 0);
    c.start({0, 2}, 42, {{"Hello"}, 1, 0.0, 0});
    QCOMPARE(started.count(), 1);
    QCOMPARE(needed.count(), 0);
    QCOMPARE(titles(started),
             std::vector<std::string>({"Sweep layer 0 target 42", "Sweep layer 2 target 42"}));
    const auto scripts = started.last().at(0).value<std::vector<ScriptRequest>>();
    QVERIFY(scripts[1].view == store::RunView::sweepLayer(2, 42));  // kept in the log
    QVERIFY(scripts[1].script.find("target = 42") != std::string::npos);
    QVERIFY(scripts[1].script.find("model.model.layers[2]") != std::string::npos);
    QVERIFY(scripts[1].script.find("Hello") != std::string::npos);
    QCOMPARE(c.effects().rows, int64_t(3));
    QCOMPARE(c.effects().cols, int64_t(4));
    for (double e : c.effects().data) QVERIFY(std::isnan(e));
  }

  void sweepWithoutTargetLooksUpTheGreedyToken() {
    SweepController c;
    c.setModel(smallModel());
    QSignalSpy needed(&c, &SweepController::targetNeeded);
    QSignalSpy found(&c, &SweepController::targetFound);
    QSignalSpy started(&c, &SweepController::started);
    c.start({1}, std::nullopt, {{"Paris"}, 1, 0.0, 0});
    QCOMPARE(needed.count(), 1);
    QCOMPARE(started.count(), 0);
    QVERIFY(c.waitingForTarget());
    auto other = std::make_shared<RunOutcome>(*topKRun(2));
    other->title = "Generate";  // not the lookup: its logits do not choose the target
    other->view = store::RunView::of(store::RunView::Kind::Generate);
    c.onRunFinished(other);
    c.onRunFinished(topKRun(4));
    QCOMPARE(started.count(), 0);  // the sweep starts when the lookup's batch has ended
    c.onBatchFinished(false);
    QCOMPARE(found.count(), 1);
    QCOMPARE(found.last().at(0).toLongLong(), qlonglong(4));
    QCOMPARE(titles(started), std::vector<std::string>({"Sweep layer 1 target 4"}));
    // The settings given when the sweep was asked for.
    QVERIFY(started.last().at(0).value<std::vector<ScriptRequest>>()[0].script.find("Paris") !=
            std::string::npos);
    QVERIFY(!c.waitingForTarget());
    c.onBatchFinished(false);  // the sweep's own batch: nothing more starts
    QCOMPARE(started.count(), 1);
  }

  void stopAndInterruptionDropAWaitingSweep() {
    for (int way = 0; way < 3; ++way) {
      SweepController c;
      c.setModel(smallModel());
      QSignalSpy started(&c, &SweepController::started);
      c.start({0}, std::nullopt, {});
      if (way == 0) c.cancel();
      if (way == 1) c.onRunFinished(topKRun(1, store::RunStatus::Interrupted));
      if (way == 2) c.onBatchFinished(true);
      QVERIFY(!c.waitingForTarget());
      c.onRunFinished(topKRun(1));
      c.onBatchFinished(false);
      QCOMPARE(started.count(), 0);
    }
  }

  void failedLookupDropsTheSweep() {
    SweepController c;
    c.setModel(smallModel());
    QSignalSpy started(&c, &SweepController::started);
    c.start({0}, 5, {{"x"}, 1, 0.0, 0});  // an earlier sweep's target
    QCOMPARE(started.count(), 1);
    c.start({1}, std::nullopt, {{"x"}, 1, 0.0, 0});
    auto failed = std::make_shared<RunOutcome>(*topKRun(2));
    failed->status = store::RunStatus::Failed;
    c.onRunFinished(failed);
    c.onBatchFinished(false);
    QCOMPARE(started.count(), 1);  // not swept for the earlier target 5
    QVERIFY(!c.waitingForTarget());
    c.onRunFinished(topKRun(2));  // a later Top-k of the user's own starts nothing
    c.onBatchFinished(false);
    QCOMPARE(started.count(), 1);
  }

  void layerPastTheModelIsNotDrawn() {
    SweepController c;
    c.setModel(smallModel());  // 3 layers
    QSignalSpy changed(&c, &SweepController::effectsChanged);
    QVERIFY(!c.addLayerRun(4, store::RunView::sweepLayer(3, 1),
                           layerRun(0.5f, {0.1f, 0.2f, 0.3f, 0.4f})));
    QCOMPARE(changed.count(), 0);
    QVERIFY(!c.runOf(3));
  }

  void layerRunBecomesItsRowOfEffects() {
    SweepController c;
    c.setModel(smallModel());
    QSignalSpy changed(&c, &SweepController::effectsChanged);
    const trace::RunResult run = layerRun(0.5f, {0.25f, 0.5f, 0.75f, 1.0f});
    QVERIFY(SweepController::isLayerRun(run));
    QVERIFY(!SweepController::isLayerRun(withValues({floats("baseline", {1}, {0.5f})})));
    // Not made as a sweep layer: a read, or a script of the user's that saved the same names.
    QVERIFY(!c.addLayerRun(7, store::RunView::read("model.x.output", 0), run));
    QVERIFY(!c.addLayerRun(7, store::RunView{}, run));
    QCOMPARE(changed.count(), 0);
    QVERIFY(c.addLayerRun(7, store::RunView::sweepLayer(1, 42), run));
    QCOMPARE(changed.count(), 1);
    QVERIFY(changed.last().at(1).toString().contains("baseline 0.5000"));
    const Matrix& e = c.effects();
    const std::vector<double> row1 = {-0.25, 0.0, 0.25, 0.5};
    for (int64_t l = 0; l < 3; ++l) {
      for (int64_t h = 0; h < 4; ++h) {
        if (l == 1)
          QCOMPARE(e.at(l, h), row1[size_t(h)]);
        else
          QVERIFY(std::isnan(e.at(l, h)));
      }
    }
    const Matrix drawn = changed.last().at(0).value<Matrix>();
    QCOMPARE(drawn.rows, e.rows);
    QCOMPARE(drawn.at(1, 3), 0.5);
    QVERIFY(std::isnan(drawn.at(0, 0)));
    QCOMPARE(c.runOf(1).value_or(-1), int64_t(7));
    QVERIFY(!c.runOf(0));
    // A new sweep or a new model forgets the runs.
    c.start({0}, 3, {{"x"}, 1, 0.0, 0});
    QVERIFY(!c.runOf(1));
    QVERIFY(c.addLayerRun(9, store::RunView::sweepLayer(2, 3), run));
    c.setModel(smallModel());
    QVERIFY(!c.runOf(2));
    QVERIFY(std::isnan(c.effects().at(2, 0)));
  }
};

QTEST_GUILESS_MAIN(TestSweepController)
#include "tst_sweep_controller.moc"
