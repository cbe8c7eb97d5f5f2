// The desktop window on a shardscope-engine server (issue 18, offscreen): a real engine (two rank
// processes under mpirun, the demo model) is started, the window connects to it, shows its model
// (module tree, ranks with their hosts) and where it runs, reads a port whose value equals the one
// rank threads give, and records the engine's identity in the session log. Then the engine is
// stopped: the window says "engine lost" within seconds (between jobs, from its check, and again
// for a run) while its event loop keeps running; the engine is started again on the same port and
// Reconnect opens it, and a run works again. Fails on any Qt warning, like the other GUI suites.
#include <QElapsedTimer>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTimer>
#include <QtTest>
#include <fstream>

#include "common/cli_saved_value.h"
#include "common/engine_server_process.h"
#include "common/main_window_waits.h"
#include "common/qt_warnings.h"
#include "common/test_support.h"
#include "core/store/session_store.h"
#include "ui/engine_panel.h"
#include "ui/heatmap_view.h"
#include "ui/main_window.h"
#include "ui/script_editor.h"

using namespace shardscope;
using namespace shardscope::ui;

namespace {

const std::string kOProj = "model.model.layers[1].self_attn.o_proj";

std::unique_ptr<MainWindow> connectWindow(const std::filesystem::path& session,
                                          const QString& engine) {
  StartOptions o;
  o.engine = engine;
  o.sessionFile = QString::fromStdString(session.string());
  o.restoreState = false;
  auto w = std::make_unique<MainWindow>(o);
  w->show();
  return w;
}

// Measures how late a 10 ms timer fires while it runs: the event loop never waits long.
class Lateness {
 public:
  Lateness() {
    timer_.setInterval(10);
    timer_.setTimerType(Qt::PreciseTimer);
    QObject::connect(&timer_, &QTimer::timeout, [this] {
      const qint64 now = clock_.elapsed();
      if (ticks_++ > 0) worst_ = std::max(worst_, now - last_ - 10);
      last_ = now;
    });
    clock_.start();
    timer_.start();
  }
  qint64 worst() const { return worst_; }
  qint64 elapsed() const { return clock_.elapsed(); }
  int ticks() const { return ticks_; }

 private:
  QTimer timer_;
  QElapsedTimer clock_;
  qint64 last_ = 0, worst_ = 0;
  int ticks_ = 0;
};

}  // namespace

class TestEngineGui : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() {
    if (QStandardPaths::findExecutable("mpirun").isEmpty())
      QSKIP("mpirun is not installed (apt-get install openmpi-bin libopenmpi-dev)");
    QStandardPaths::setTestModeEnabled(true);
    warnings_ = std::make_unique<test::QtWarnings>();  // after Qt Test's own handler
  }
  void cleanupTestCase() { warnings_.reset(); }
  void cleanup() {
    const QString warnings = warnings_ ? warnings_->take() : QString();
    QVERIFY2(warnings.isEmpty(), qPrintable("Qt warned:\n" + warnings));
  }

  void connectRunLoseAndReconnect() {
    test::TempDir dir;
    const QString address = QString("127.0.0.1:%1").arg(test::freePort());
    auto engine =
        std::make_unique<test::EngineServerProcess>(2, QStringList{"--model", "demo"}, address);
    QVERIFY2(engine->waitServing(), qPrintable(engine->err()));

    // The engine's model, shown as a loaded one is, with where it runs.
    auto w = connectWindow(dir.path() / "s.db", address);
    QVERIFY(test::waitLoaded(*w));
    const ModelInfo& m = w->controller()->model();
    QCOMPARE(m.tp, 2);
    QCOMPARE(QString::fromStdString(m.backend), QString("mpi"));
    QCOMPARE(m.rankHosts.size(), size_t(2));
    QVERIFY(!m.modules.empty());
    QVERIFY(!w->controller()->portShapes().empty());
    QVERIFY(w->controller()->tokenizer());
    QCOMPARE(w->enginePanel()->rankRows(), 2);
    const QString where = w->enginePanel()->engineText();
    QVERIFY2(where.contains("shardscope-engine") && where.contains(address) &&
                 where.contains("rank 1 " + QString::fromStdString(m.rankHosts[1])),
             qPrintable(where));

    // A port read on the engine: drawn, equal to rank threads', the engine in the session log.
    QVERIFY(w->selectPort(kOProj, "input"));
    QSignalSpy shown(w.get(), &MainWindow::resultShown);
    w->readSelectedPort();
    QVERIFY(shown.wait(120000));
    QVERIFY(test::waitIdle(*w));
    const Matrix heat = w->heatmap()->matrix();  // a copy: the second read redraws it
    const std::string script = w->editor()->toPlainText().toStdString();
    const auto local = test::cliSavedValue(dir.path(), script, "value_0", {"--tp", "2"});
    // The prompt's tokens (as the demo's tokenizer splits it) by every head's values.
    QCOMPARE(local.tensor.shape.size(), size_t(2));
    QCOMPARE(heat.rows, int64_t(local.tensor.shape[0]));
    QCOMPARE(heat.cols, m.numHeads * m.headDim);
    const store::RunSummary last = w->controller()->session()->runs().back();
    QCOMPARE(QString(store::runStatusName(last.status)), QString("done"));
    const store::RunRecord record = w->controller()->session()->run(last.id);
    QCOMPARE(record.result.models.size(), size_t(1));
    const std::string recorded = record.result.models[0].engineVersion;
    QVERIFY2(recorded.find("shardscope-engine") != std::string::npos &&
                 recorded.find(address.toStdString()) != std::string::npos &&
                 recorded.find("LibTorch") != std::string::npos,
             recorded.c_str());
    const trace::SavedValue remote = w->controller()->session()->value(last.id, "value_0");
    QCOMPARE(remote.tensor.shape, local.tensor.shape);
    // MPI's all-reduce adds in rank order as rank threads do: the same bits.
    QVERIFY2(remote.tensor.bytes == local.tensor.bytes,
             "the engine's value differs from rank threads'");

    // A script error on the engine marks its line, as a local one does.
    w->editor()->setPlainText(
        "model = VLLM(\"demo\")\n"
        "with model.trace(\"Hello\"):\n"
        "    h = model.model.layers[1].no_such_module.output.save()\n");
    w->runEditorScript();
    QVERIFY(test::waitIdle(*w));
    QCOMPARE(w->editor()->errorLine(), 3);
    QVERIFY(w->messages()->toPlainText().contains("no_such_module"));
    // Stop cancels the engine's job: the run is recorded as interrupted, and the engine serves on.
    // A generation the model cannot end early: the demo model on the CPU now writes its EOS in
    // well under a second (74 steps in 0.12 s), sometimes between two polls of the progress.
    w->editor()->setPlainText(
        "model = VLLM(\"demo\")\n"
        "with model.trace(\"Hello\", max_tokens=2000, ignore_eos=True):\n"
        "    pass\n");
    QSignalSpy batch(w->controller(), &EngineController::batchFinished);
    w->runEditorScript();
    for (int i = 0; i < 2400 && w->controller()->progress().step < 2; ++i) QTest::qWait(50);
    QVERIFY(w->controller()->progress().step >= 2);  // progress streams back
    w->stop();
    QVERIFY(batch.wait(60000));
    QVERIFY(test::waitIdle(*w));
    QCOMPARE(QString(store::runStatusName(w->controller()->session()->runs().back().status)),
             QString("interrupted"));
    QVERIFY(!w->controller()->engineIsLost());
    w->setMaxTokens(4);

    // The engine goes away: "engine lost" between jobs, found with the event loop running.
    QSignalSpy lost(w->controller(), &EngineController::engineLost);
    engine.reset();  // stops mpirun and its rank processes (this thread waits for them)
    {
      Lateness lateness;
      QVERIFY(lost.count() > 0 || lost.wait(20000));
      QTest::qWait(200);
      qInfo("engine lost after %lld ms: %d timer ticks, worst lateness %lld ms",
            (long long)lateness.elapsed(), lateness.ticks(), (long long)lateness.worst());
      // A check that blocked on the network would stall for seconds (the connect timeout is
      // 10 s); the margin is for a machine busy with other work.
      QVERIFY2(lateness.worst() < 250,
               qPrintable(QString("event loop stalled %1 ms").arg(lateness.worst())));
    }
    QVERIFY(w->controller()->engineIsLost());
    QVERIFY2(w->enginePanel()->engineText().startsWith("Engine lost: "),
             qPrintable(w->enginePanel()->engineText()));
    QVERIFY2(w->statusText().contains("Engine lost"), qPrintable(w->statusText()));
    // A run on the lost engine fails at once, saying so, and is recorded as failed.
    QSignalSpy finished(w->controller(), &EngineController::runFinished);
    w->readSelectedPort();
    QVERIFY(finished.wait(20000));
    const auto outcome = finished.last().at(0).value<std::shared_ptr<const RunOutcome>>();
    QCOMPARE(QString(store::runStatusName(outcome->status)), QString("failed"));
    QVERIFY2(outcome->error.find("engine lost") != std::string::npos, outcome->error.c_str());
    QVERIFY(test::waitIdle(*w));
    QVERIFY2(w->statusText().contains("Engine lost"), qPrintable(w->statusText()));

    // Started again on the same port: Reconnect opens it, and runs work again.
    engine =
        std::make_unique<test::EngineServerProcess>(2, QStringList{"--model", "demo"}, address);
    QVERIFY2(engine->waitServing(), qPrintable(engine->err()));
    w->reconnectEngine();
    QVERIFY(test::waitLoaded(*w));
    QVERIFY(!w->controller()->engineIsLost());
    QVERIFY2(!w->enginePanel()->engineText().startsWith("Engine lost"),
             qPrintable(w->enginePanel()->engineText()));
    QVERIFY(w->selectPort(kOProj, "input"));
    w->readSelectedPort();
    QVERIFY(shown.wait(120000));
    QVERIFY(test::waitIdle(*w));
    QCOMPARE(QString(store::runStatusName(w->controller()->session()->runs().back().status)),
             QString("done"));
    QCOMPARE(w->heatmap()->matrix().data, heat.data);
  }

  // Nothing listens there: the window says so and stays usable.
  void connectingToNothingFails() {
    test::TempDir dir;
    auto w = connectWindow(dir.path() / "s.db", QString("127.0.0.1:%1").arg(test::freePort()));
    QSignalSpy failed(w->controller(), &EngineController::loadFailed);
    QVERIFY(failed.count() > 0 || failed.wait(60000));
    QVERIFY2(failed.last().at(0).toString().contains("cannot reach an engine"),
             qPrintable(failed.last().at(0).toString()));
    QVERIFY(!w->controller()->hasModel());
    QVERIFY(test::waitIdle(*w));
  }

 private:
  std::unique_ptr<test::QtWarnings> warnings_;
};

QTEST_MAIN(TestEngineGui)
#include "tst_engine_gui.moc"
