// The desktop window on the demo model (tp=2, offscreen): reading a port, zeroing heads, an
// ablation sweep with cancel, a bad script, ids past the tokenizer in the output view, the session
// log across restarts with replay, and the event loop's responsiveness during generation. Values
// are checked against what `shardscope-cli run` saves for the same script. Every test function
// fails on any Qt or QCustomPlot warning it causes (the window's output is meant to be quiet), and
// File > Examples loads an example into the script editor, which runs it.
#include <QAction>
#include <QCheckBox>
#include <QElapsedTimer>
#include <QImage>
#include <QMenu>
#include <QMenuBar>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QScrollBar>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTabWidget>
#include <QTreeView>
#include <QtTest>
#include <fstream>

#include "common/cli_saved_value.h"
#include "common/main_window_waits.h"
#include "common/qt_warnings.h"
#include "common/random_model.h"
#include "common/test_support.h"
#include "core/model/model_source.h"
#include "core/model/safetensors_file.h"
#include "core/store/session_store.h"
#include "ui/engine_panel.h"
#include "ui/head_grid_view.h"
#include "ui/heatmap_view.h"
#include "ui/logit_lens_view.h"
#include "ui/main_window.h"
#include "ui/output_diff_view.h"
#include "ui/routing_view.h"
#include "ui/script_editor.h"
#include "ui/session_log_model.h"
#include "ui/top_k_view.h"

using namespace shardscope;
using namespace shardscope::ui;

namespace {

const std::string kOProj = "model.model.layers[1].self_attn.o_proj";
// The demo model's default prompt "The capital of France is" is 7 tokens; o_proj's input is
// 8 heads x head_dim 32.
constexpr int64_t kPromptTokens = 7;
constexpr int64_t kHeadsWidth = 256;

std::unique_ptr<MainWindow> openWindow(const std::filesystem::path& session,
                                       const std::string& model = "demo") {
  StartOptions o;
  o.model.model = model;
  o.model.tp = 2;
  o.sessionFile = QString::fromStdString(session.string());
  o.restoreState = false;
  auto w = std::make_unique<MainWindow>(o);
  w->show();
  return w;
}

std::vector<double> asDoubles(const HostTensor& t) {
  std::vector<double> out(size_t(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) out[size_t(i)] = t.element(i);
  return out;
}

}  // namespace

class TestMainWindow : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() {
    QStandardPaths::setTestModeEnabled(true);
    warnings_ = std::make_unique<test::QtWarnings>();  // after Qt Test's own handler
  }
  void cleanupTestCase() { warnings_.reset(); }
  void cleanup() {
    const QString warnings = warnings_->take();
    QVERIFY2(warnings.isEmpty(), qPrintable("Qt warned:\n" + warnings));
  }

  // File > Examples > Logit lens puts the example in the editor, wrapped to the panel's width;
  // running it records the lens of every layer.
  void examplesMenuLoadsAnExample() {
    test::TempDir dir;
    auto w = openWindow(dir.path() / "s.db");
    QVERIFY(test::waitLoaded(*w));
    QMenu* file = nullptr;
    for (QAction* a : w->menuBar()->actions())
      if (a->text() == "&File") file = a->menu();
    QVERIFY(file);
    QMenu* examples = nullptr;
    for (QAction* a : file->actions())
      if (a->menu() && a->text() == "E&xamples") examples = a->menu();
    QVERIFY(examples);
    QVERIFY(examples->actions().size() >= 11);
    QAction* lens = examples->findChild<QAction*>("example_logit_lens");
    QVERIFY(lens);
    QCOMPARE(lens->text(), QString("Logit lens"));
    lens->trigger();
    const QString text = w->editor()->toPlainText();
    QVERIFY(text.startsWith("# Title: Logit lens\n"));
    QVERIFY(text.contains("model.logits_processor(model.lm_head"));
    QVERIFY2(w->statusText().contains("Logit lens"), qPrintable(w->statusText()));
    QCOMPARE(w->editor()->lineWrapMode(), QPlainTextEdit::WidgetWidth);
    QCOMPARE(w->editor()->horizontalScrollBar()->maximum(), 0);
    QSignalSpy shown(w.get(), &MainWindow::resultShown);
    w->runEditorScript();
    QVERIFY(shown.wait(120000));
    QVERIFY(test::waitIdle(*w));
    const store::RunSummary* run = w->sessionLog()->runAt(w->sessionLog()->rowCount() - 1);
    QCOMPARE(QString(store::runStatusName(run->status)), QString("done"));
    const store::RunRecord record = w->controller()->session()->run(run->id);
    QVERIFY2(record.result.printed.find("model: ") != std::string::npos,
             record.result.printed.c_str());
  }

  void readPortMatchesCli() {
    test::TempDir dir;
    auto w = openWindow(dir.path() / "s.db");
    QVERIFY(test::waitLoaded(*w));
    QCOMPARE(w->enginePanel()->rankRows(), 2);
    QVERIFY(w->selectPort(kOProj, "input"));
    // Double-clicking a port reads it.
    QTreeView* tree = w->moduleTree();
    QRect rect = tree->visualRect(tree->currentIndex());
    tree->horizontalScrollBar()->setValue(tree->horizontalScrollBar()->value() + rect.x());
    rect = tree->visualRect(tree->currentIndex());
    QVERIFY(rect.isValid());
    QSignalSpy shown(w.get(), &MainWindow::resultShown);
    const QPoint at = rect.topLeft() + QPoint(4, rect.height() / 2);
    QVERIFY(tree->viewport()->rect().contains(at));
    QTest::mouseClick(tree->viewport(), Qt::LeftButton, {},
                      at);  // Qt's double-click follows a press
    QTest::mouseDClick(tree->viewport(), Qt::LeftButton, {}, at);
    QVERIFY(shown.wait(120000));
    QVERIFY(test::waitIdle(*w));
    const Matrix& m = w->heatmap()->matrix();
    QCOMPARE(m.rows, kPromptTokens);
    QCOMPARE(m.cols, kHeadsWidth);
    const std::string script = w->editor()->toPlainText().toStdString();
    QVERIFY(script.find(kOProj + ".input.save()") != std::string::npos);
    const auto cli = test::cliSavedValue(dir.path(), script, "value_0");
    QCOMPARE(cli.tensor.shape, (std::vector<int64_t>{kPromptTokens, kHeadsWidth}));
    QVERIFY2(asDoubles(cli.tensor) == m.data, "the heatmap differs from the CLI's saved value");
    QVERIFY(w->heatmap()->readoutAt(3, 1).startsWith("token 1 ("));
    // Per-head norms: tokens x heads.
    const auto before = shown.count();
    w->perHeadNorms()->setChecked(true);  // redrawn from the session file, without running
    QCOMPARE(shown.count(), before + 1);
    QCOMPARE(w->heatmap()->matrix().cols, int64_t(8));
    // Export: the values as safetensors, the plot as PNG, the heatmap as CSV.
    const QString base = QString::fromStdString(dir.path().string());
    QCOMPARE(w->saveValues(base + "/v.safetensors"), QString());
    SafetensorsFile values((dir.path() / "v.safetensors"));
    QVERIFY(values.contains("value_0"));
    QCOMPARE(values.entry("value_0").shape, (std::vector<int64_t>{kPromptTokens, kHeadsWidth}));
    QCOMPARE(w->savePlot(base + "/p.png"), QString());
    const QImage png(base + "/p.png");
    QVERIFY(png.width() > 100 && png.height() > 100);
    QCOMPARE(w->saveCsv(base + "/h.csv"), QString());
    QFile csv(base + "/h.csv");
    QVERIFY(csv.open(QIODevice::ReadOnly));
    const QStringList rows = QString::fromUtf8(csv.readAll()).split('\n', Qt::SkipEmptyParts);
    QCOMPARE(rows.size(), int(kPromptTokens));
    QCOMPARE(rows[0].split(',').size(), 1 + 8);  // token label + 8 heads (per-head norms shown)
  }

  void zeroTwoHeadsMatchesCli() {
    test::TempDir dir;
    auto w = openWindow(dir.path() / "s.db");
    QVERIFY(test::waitLoaded(*w));
    w->setMaxTokens(6);
    w->tabs()->setCurrentIndex(1);
    QTest::qWait(100);
    HeadGridView* grid = w->headGrid();
    QWidget* canvas = grid->canvas();
    QTest::mouseClick(canvas, Qt::LeftButton, {}, grid->cellCentre(1, 2));
    QTest::mouseClick(canvas, Qt::LeftButton, {}, grid->cellCentre(1, 5));
    QCOMPARE(w->ablatedHeads().size(), size_t(1));
    QCOMPARE(w->ablatedHeads().at(1), (std::set<int64_t>{2, 5}));
    const QString editor = w->editor()->toPlainText();
    QVERIFY2(editor.contains(QString::fromStdString(kOProj) + ".head(z, 2)[:] = 0"),
             qPrintable(editor));
    QVERIFY(editor.contains(QString::fromStdString(kOProj) + ".head(z, 5)[:] = 0"));
    QSignalSpy shown(w.get(), &MainWindow::resultShown);
    w->runAblation();
    QVERIFY(shown.wait(120000));
    QVERIFY(test::waitIdle(*w));
    QVERIFY(!w->outputView()->baselineText().isEmpty());
    QVERIFY(!w->outputView()->ablatedText().isEmpty());
    QVERIFY2(w->outputView()->summary().contains("at the first step"),
             qPrintable(w->outputView()->summary()));
    const int64_t run = w->sessionLog()->runAt(w->sessionLog()->rowCount() - 1)->id;
    const std::string script = w->editor()->toPlainText().toStdString();
    for (const char* name : {"baseline_logits", "ablated_logits"}) {
      const auto gui = w->controller()->session()->value(run, name);
      const auto cli = test::cliSavedValue(dir.path(), script, name);
      QVERIFY2(gui.tensor.bytes == cli.tensor.bytes, name);
    }
    const auto base = w->controller()->session()->value(run, "baseline_logits");
    const auto ablated = w->controller()->session()->value(run, "ablated_logits");
    QVERIFY(base.tensor.bytes != ablated.tensor.bytes);  // the writes took effect
  }

  void sweepTwoLayersThenCancel() {
    test::TempDir dir;
    auto w = openWindow(dir.path() / "s.db");
    QVERIFY(test::waitLoaded(*w));
    w->runSweep({0, 1});  // no target given: a top-k run finds the greedy token first
    for (int i = 0; i < 6000 && !(w->sweepRun(0) && w->sweepRun(1) && !w->controller()->busy());
         ++i)
      QTest::qWait(50);
    QVERIFY(w->sweepRun(0) && w->sweepRun(1));
    const Matrix& e = w->sweepGrid()->effects();
    QCOMPARE(e.rows, int64_t(4));
    QCOMPARE(e.cols, int64_t(8));
    for (int64_t l = 0; l < 4; ++l) {
      for (int64_t h = 0; h < 8; ++h) QCOMPARE(std::isfinite(e.at(l, h)), l < 2);
    }
    // Clicking a sweep cell opens that layer's run.
    w->tabs()->setCurrentWidget(w->sweepGrid());
    QTest::qWait(100);
    QSignalSpy opened(w.get(), &MainWindow::resultShown);
    QTest::mouseClick(w->sweepGrid()->canvas(), Qt::LeftButton, {},
                      w->sweepGrid()->cellCentre(1, 3));
    QCOMPARE(opened.count(), 1);
    QCOMPARE(opened.last().at(0).toLongLong(), qlonglong(*w->sweepRun(1)));
    // Cancel a long sweep after its first layer.
    std::string longPrompt;
    for (int i = 0; i < 150; ++i) longPrompt += "The capital of France is Paris. ";
    w->setPrompts({QString::fromStdString(longPrompt)});
    w->setTarget("#100");
    QSignalSpy batch(w->controller(), &EngineController::batchFinished);
    bool stopped = false;
    connect(w->controller(), &EngineController::runFinished, this, [&] {
      if (!stopped) w->stop();
      stopped = true;
    });
    w->runSweep({0, 1, 2, 3});
    QVERIFY(batch.wait(300000));
    QCOMPARE(batch.last().at(0).toBool(), true);  // cancelled
    QVERIFY(test::waitIdle(*w));
    int sweepRuns = 0;
    for (const auto& r : w->controller()->session()->runs())
      sweepRuns += r.title.find("target 100") != std::string::npos;
    QVERIFY2(sweepRuns < 4, "the sweep ran to its end despite Stop");
    disconnect(w->controller(), &EngineController::runFinished, this, nullptr);
    // The window is usable afterwards.
    w->setPrompts({"Hello"});
    QSignalSpy shown(w.get(), &MainWindow::resultShown);
    w->runTopK();
    QVERIFY(shown.wait(60000));
  }

  void badScriptShowsItsLine() {
    test::TempDir dir;
    auto w = openWindow(dir.path() / "s.db");
    QVERIFY(test::waitLoaded(*w));
    w->editor()->setPlainText(
        "model = VLLM(\"demo\")\n"
        "with model.trace(\"Hello\"):\n"
        "    h = model.model.layers[1].no_such_module.output.save()\n");
    w->runEditorScript();
    QVERIFY(test::waitIdle(*w));
    QCOMPARE(w->editor()->errorLine(), 3);
    QVERIFY(w->messages()->toPlainText().contains("no_such_module"));
    w->editor()->setPlainText(
        "model = VLLM(\"demo\")\n"
        "with model.trace(\"Hello\"):\n"
        "    h = model.model.layers[1].mlp.output.save()\n");
    QSignalSpy shown(w.get(), &MainWindow::resultShown);
    w->runEditorScript();
    QVERIFY(shown.wait(60000));
    QCOMPARE(w->editor()->errorLine(), 0);
    const auto runs = w->controller()->session()->runs();
    QCOMPARE(runs.size(), size_t(2));
    QCOMPARE(QString(store::runStatusName(runs[0].status)), QString("failed"));
    QCOMPARE(QString(store::runStatusName(runs[1].status)), QString("done"));
  }

  // Qwen3's LM head has more rows than its tokenizer has ids: a generated id without a token
  // shows as a marker in the output view (plain runs and side-by-side comparisons alike). On the
  // random test model, which has Qwen3's vocabulary (the trained demo's rows and ids are equal).
  void idsPastTheTokenizerShowAsMarkers() {
    test::TempDir dir;
    auto w = openWindow(dir.path() / "s.db", ensureDemoModel().string());
    QVERIFY(test::waitLoaded(*w));
    w->editor()->setPlainText(
        "model = VLLM(\"demo\")\n"
        "with model.trace(\"Hello\", max_tokens=3, ignore_eos=True) as tracer:\n"
        "    for i in tracer.iter[:3]:\n"
        "        model.samples[:] = 151691 if i == 1 else 9625\n");
    QSignalSpy shown(w.get(), &MainWindow::resultShown);
    w->runEditorScript();
    QVERIFY(shown.wait(60000));
    QVERIFY(test::waitIdle(*w));
    QCOMPARE(w->editor()->errorLine(), 0);
    OutputDiffView* view = w->outputView();
    QCOMPARE(view->baselineText(), QString(" France<|id 151691|> France"));
    view->setComparison({9625, 151691}, {9625, 9625}, w->controller()->tokenizer(), "#151691", 0.5,
                        0.25);
    QCOMPARE(view->changedTokens(), 1);
    QCOMPARE(view->baselineText(), QString(" France<|id 151691|>"));
    QCOMPARE(view->ablatedText(), QString(" France France"));
  }

  void sessionLogSurvivesRestartAndReplays() {
    test::TempDir dir;
    const auto session = dir.path() / "s.db";
    int64_t readRun = 0;
    {
      auto w = openWindow(session);
      QVERIFY(test::waitLoaded(*w));
      QVERIFY(w->selectPort(kOProj, "input"));
      QSignalSpy shown(w.get(), &MainWindow::resultShown);
      w->readSelectedPort();
      QVERIFY(shown.wait(60000));
      QVERIFY(test::waitIdle(*w));  // the result is shown before the worker's end reaches the GUI
      w->runLogitLens();
      QVERIFY(shown.wait(60000));
      QVERIFY(test::waitIdle(*w));
      QCOMPARE(w->sessionLog()->rowCount(), 2);
      readRun = w->sessionLog()->runAt(0)->id;
    }
    auto w = openWindow(session);
    QVERIFY(test::waitLoaded(*w));
    QCOMPARE(w->sessionLog()->rowCount(), 2);
    QVERIFY(QString::fromStdString(w->sessionLog()->runAt(0)->title)
                .startsWith("Read " + QString::fromStdString(kOProj)));
    // The log keeps what the read was made for: the port and step its view needs.
    QVERIFY(w->sessionLog()->runAt(0)->view == store::RunView::read(kOProj + ".input", 0));
    QVERIFY(w->sessionLog()->runAt(1)->view == store::RunView::of(store::RunView::Kind::LogitLens));
    QSignalSpy shown(w.get(), &MainWindow::resultShown);
    w->openRun(readRun);  // drawn from the file, without running
    QCOMPARE(shown.count(), 1);
    QCOMPARE(w->heatmap()->matrix().rows, kPromptTokens);
    QVERIFY(!w->controller()->busy());
    QSignalSpy replayed(w.get(), &MainWindow::replayShown);
    w->replayRun(readRun);
    QVERIFY(replayed.wait(120000));
    QCOMPARE(replayed.last().at(0).toBool(), true);
    QVERIFY(w->messages()->toPlainText().contains("value_0: bit-identical"));
  }

  // Logit lens, top-k and an attention pattern, drawn from what their scripts saved.
  void lensTopKAndAttention() {
    test::TempDir dir;
    auto w = openWindow(dir.path() / "s.db");
    QVERIFY(test::waitLoaded(*w));
    QSignalSpy shown(w.get(), &MainWindow::resultShown);
    w->runLogitLens();
    QVERIFY(shown.wait(60000));
    const Matrix& lens = w->logitLens()->probabilities();
    QCOMPARE(lens.rows, int64_t(4));     // layers
    QCOMPARE(lens.cols, kPromptTokens);  // positions
    for (double p : lens.data) QVERIFY(p > 0 && p <= 1);
    QVERIFY(test::waitIdle(*w));
    w->runTopK();
    QVERIFY(shown.wait(60000));
    const auto& bars = w->topK()->tokens();
    QCOMPARE(bars.size(), size_t(10));
    for (size_t i = 1; i < bars.size(); ++i) QVERIFY(bars[i - 1].second >= bars[i].second);
    // The top token's probability is the last layer's lens value at the last position.
    QVERIFY(std::abs(bars[0].second - lens.at(3, kPromptTokens - 1)) < 1e-5);
    QVERIFY(test::waitIdle(*w));
    w->runAttentionPattern(1, 3);
    QVERIFY(shown.wait(60000));
    const Matrix& a = w->attention()->matrix();
    QCOMPARE(a.rows, kPromptTokens);
    QCOMPARE(a.cols, kPromptTokens);
    for (int64_t i = 0; i < kPromptTokens; ++i) {
      double sum = 0;
      for (int64_t j = 0; j < kPromptTokens; ++j) {
        sum += a.at(i, j);
        if (j > i) QCOMPARE(a.at(i, j), 0.0);  // causal
      }
      QVERIFY(std::abs(sum - 1) < 1e-9);
    }
    // As the screenshot tour does: grabbing the window flushes the pending resizes of tabs never
    // shown, which must not replot into empty paint buffers (cleanup() fails on the warnings).
    QVERIFY(!w->grab().isNull());
    for (int i = 0; i < w->tabs()->count(); ++i) {
      w->tabs()->setCurrentIndex(i);
      QVERIFY(!w->grab().isNull());
    }
  }

  // Loading can be cancelled; the window loads again afterwards.
  void loadingCanBeCancelled() {
    test::TempDir dir;
    auto w = openWindow(dir.path() / "s.db");
    QVERIFY(test::waitLoaded(*w));
    QSignalSpy failed(w->controller(), &EngineController::loadFailed);
    EngineOptions o;
    o.model = "demo";
    o.tp = 1;
    w->openModel(o);
    w->stop();
    QVERIFY(failed.wait(60000));
    QVERIFY2(failed.last().at(0).toString().contains("cancelled"),
             qPrintable(failed.last().at(0).toString()));
    QVERIFY(!w->controller()->hasModel());
    w->openModel(o);
    QVERIFY(test::waitLoaded(*w));
    QCOMPARE(w->controller()->model().tp, 1);
  }

  // A 10 ms timer's lateness during a 64-token generation: the event loop never waits long.
  void staysResponsiveDuringGeneration() {
    test::TempDir dir;
    auto w = openWindow(dir.path() / "s.db");
    QVERIFY(test::waitLoaded(*w));
    w->setMaxTokens(64);
    QElapsedTimer clock;
    qint64 last = 0, worst = 0;
    int ticks = 0;
    QTimer timer;
    timer.setInterval(10);
    timer.setTimerType(Qt::PreciseTimer);
    connect(&timer, &QTimer::timeout, this, [&] {
      const qint64 now = clock.elapsed();
      if (ticks++ > 0) worst = std::max(worst, now - last - 10);
      last = now;
    });
    QSignalSpy batch(w->controller(), &EngineController::batchFinished);
    clock.start();
    timer.start();
    w->runGeneration();
    QVERIFY(batch.wait(300000));
    QTest::qWait(200);  // the result is drawn after the batch ends
    timer.stop();
    qInfo("64-token generation: %d timer ticks over %lld ms, worst lateness %lld ms", ticks,
          (long long)clock.elapsed(), (long long)worst);
    QVERIFY(ticks > 10);
    QVERIFY2(worst < 50, qPrintable(QString("event loop stalled %1 ms").arg(worst)));
  }

  // MoE (issue 16): Route prompt draws each sparse layer's choice of experts for every token;
  // clicking a cell ablates that cell's top expert through its router logit, in a recorded run
  // whose values equal the CLI's for the same script.
  void routingAndExpertAblation() {
    test::TempDir dir;
    StartOptions o;
    o.model.model = test::randomModelSpec(dir.path() / "moe", "qwen3-moe-small.json");
    o.model.tp = 2;
    o.sessionFile = QString::fromStdString((dir.path() / "s.db").string());
    o.restoreState = false;
    auto w = std::make_unique<MainWindow>(o);
    w->show();
    QVERIFY(test::waitLoaded(*w));
    w->setMaxTokens(3);
    QSignalSpy shown(w.get(), &MainWindow::resultShown);
    w->routingView()->routeButton()->click();
    QVERIFY(shown.wait(120000));
    QVERIFY(test::waitIdle(*w));
    const ExpertRouting routing = w->routingView()->routing();
    QCOMPARE(routing.layers, (std::vector<int64_t>{0, 1, 2}));  // every layer is sparse
    QCOMPARE(routing.topK, int64_t(4));
    QVERIFY(routing.tokens > 1);
    for (size_t row = 0; row < routing.layers.size(); ++row) {
      for (int64_t t = 0; t < routing.tokens; ++t) {
        double sum = 0;
        for (int64_t k = 0; k < routing.topK; ++k) {
          sum += routing.weight(row, t, k);
          QVERIFY(routing.expert(row, t, k) >= 0 && routing.expert(row, t, k) < 16);
        }
        QVERIFY2(std::abs(sum - 1.0) < 1e-4, "norm_topk_prob: the chosen weights sum to 1");
      }
    }
    // The router probabilities the chart shows are the ones the choice was made from: they sum
    // to 1, no expert left out is more probable than one chosen, and each chosen weight is its
    // probability renormalised over the chosen (norm_topk_prob).
    QVERIFY(routing.hasProbabilities());
    QCOMPARE(routing.numExperts, int64_t(16));
    for (size_t row = 0; row < routing.layers.size(); ++row) {
      for (int64_t t = 0; t < routing.tokens; ++t) {
        double total = 0, leastChosen = 1;
        std::vector<bool> chosen(16, false);
        for (int64_t k = 0; k < routing.topK; ++k) {
          const int64_t e = routing.expert(row, t, k);
          chosen[size_t(e)] = true;
          leastChosen = std::min(leastChosen, routing.probability(row, t, e));
          const double renormalised = routing.probability(row, t, e) / routing.chosenMass(row, t);
          QVERIFY2(std::abs(routing.weight(row, t, k) - renormalised) < 1e-5,
                   "a chosen weight is its router probability over the chosen ones' mass");
        }
        for (int64_t e = 0; e < 16; ++e) {
          total += routing.probability(row, t, e);
          if (!chosen[size_t(e)]) QVERIFY(routing.probability(row, t, e) <= leastChosen);
        }
        QVERIFY2(std::abs(total - 1.0) < 1e-5, "the router probabilities sum to 1");
      }
    }
    const int64_t expert = routing.expert(1, 0, 0);
    QTest::mouseClick(w->routingView()->canvas(), Qt::LeftButton, {},
                      w->routingView()->cellCentre(1, 0));
    QVERIFY(shown.wait(120000));
    QVERIFY(test::waitIdle(*w));
    const store::RunSummary* run = w->sessionLog()->runAt(w->sessionLog()->rowCount() - 1);
    QCOMPARE(QString::fromStdString(run->title),
             QString("Ablate expert %1 of layer 1").arg(expert));
    const std::string script = w->editor()->toPlainText().toStdString();
    QVERIFY2(script.find("model.model.layers[1].mlp.gate.output[0][:, " + std::to_string(expert) +
                         "] = float(\"-inf\")") != std::string::npos,
             script.c_str());
    for (const char* name : {"baseline_logits", "ablated_logits"}) {
      const auto gui = w->controller()->session()->value(run->id, name);
      const auto cli = test::cliSavedValue(dir.path(), script, name);
      QVERIFY2(gui.tensor.bytes == cli.tensor.bytes, name);
    }
    const auto base = w->controller()->session()->value(run->id, "baseline_logits");
    const auto ablated = w->controller()->session()->value(run->id, "ablated_logits");
    QVERIFY(base.tensor.bytes != ablated.tensor.bytes);  // the ablation changed the logits
    QVERIFY(!w->routingDiff()->baselineText().isEmpty());
  }

 private:
  std::unique_ptr<test::QtWarnings> warnings_;
};

QTEST_MAIN(TestMainWindow)
#include "tst_main_window.moc"
