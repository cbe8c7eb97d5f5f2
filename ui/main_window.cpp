#include "main_window.h"

#include <qcustomplot.h>
#include <QAction>
#include <QApplication>
#include <QCheckBox>
#include <QCloseEvent>
#include <QDir>
#include <QDockWidget>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSettings>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QStandardPaths>
#include <QStatusBar>
#include <QTabWidget>
#include <QTableView>
#include <QTimer>
#include <QTreeView>
#include <QVBoxLayout>

#include "app_resources.h"
#include "core/model/tokenizer.h"
#include "engine_panel.h"
#include "head_grid_view.h"
#include "heatmap_view.h"
#include "logit_lens_view.h"
#include "module_tree_model.h"
#include "output_diff_view.h"
#include "plot_tools.h"
#include "prompt_bar.h"
#include "readout_label.h"
#include "result_math.h"
#include "routing_view.h"
#include "run_comparison_view.h"
#include "saved_values.h"
#include "script_editor.h"
#include "session_log_model.h"
#include "sweep_controller.h"
#include "top_k_view.h"

namespace shardscope::ui {
namespace {

QString defaultSessionFile() {
  const QString dir = QStandardPaths::writableLocation(QStandardPaths::AppDataLocation);
  QDir().mkpath(dir);
  return dir + "/session.db";
}

}  // namespace

MainWindow::MainWindow(StartOptions options, QWidget* parent)
    : QMainWindow(parent),
      controller_(new EngineController(this)),
      sweep_(new SweepController(this)),
      modelOptions_(options.model) {
  setWindowTitle("ShardScope");
  setWindowIcon(appIcon());
  // A fixed minimum size: left to the layout it is the sum of the panels' minimums, which moves
  // as their text changes (a loaded model's name, a status line), so every change re-sent the
  // platform the window's size hints (the offscreen platform warns), and it was wider than a
  // laptop screen.
  setMinimumSize(960, 600);
  buildCentre();
  buildDocks();
  buildMenus();
  connectPromptBar();
  for (QCustomPlot* plot : findChildren<QCustomPlot*>()) installPlotTools(plot);
  buildStatusBar();
  connectController();
  connectSweepAndViews();
  QSettings settings;
  if (options.restoreState) {
    restoreGeometry(settings.value("window/geometry").toByteArray());
    restoreState(settings.value("window/state").toByteArray());
  }
  if (!options.restoreState) resize(1400, 900);
  QString session = options.sessionFile;
  if (session.isEmpty()) session = settings.value("session/file", defaultSessionFile()).toString();
  const QString error = openSession(session);
  if (!error.isEmpty()) message(error);
  if (options.engine.isEmpty()) {
    openModel(modelOptions_);
  } else {
    connectEngine(options.engine, options.tokenFile);
  }
}

MainWindow::~MainWindow() = default;

// The tabs of views, the prompt bar above them.
void MainWindow::buildCentre() {
  tabs_ = new QTabWidget(this);
  heatmap_ = new HeatmapView(this);
  headGrid_ = new HeadGridView(tr("Click heads to zero their slice of o_proj.input at every "
                                  "step, then press Zero heads."),
                               this);
  diff_ = new OutputDiffView(this);
  auto* heads = new QSplitter(Qt::Vertical, this);
  headsTab_ = heads;
  heads->addWidget(headGrid_);
  heads->addWidget(diff_);
  sweepGrid_ = new HeadGridView(tr("Sweep: each head ablated alone; colour = change in the "
                                   "target token's probability. Click a cell to open its run."),
                                this);
  lens_ = new LogitLensView(this);
  topK_ = new TopKView(this);
  attention_ = new HeatmapView(this);
  routing_ = new RoutingView(this);
  routingDiff_ = new OutputDiffView(this);
  auto* routing = new QSplitter(Qt::Vertical, this);
  routing->addWidget(routing_);
  routing->addWidget(routingDiff_);
  routing->setStretchFactor(0, 2);  // the grid and its probability chart; the texts need less
  routing->setStretchFactor(1, 1);
  routingTab_ = routing;
  compare_ = new RunComparisonView(this);
  messages_ = new QPlainTextEdit(this);
  messages_->setReadOnly(true);
  tabs_->addTab(heatmap_, tr("Activations"));
  tabs_->addTab(heads, tr("Heads"));
  tabs_->addTab(sweepGrid_, tr("Sweep"));
  tabs_->addTab(lens_, tr("Logit lens"));
  tabs_->addTab(topK_, tr("Top-k"));
  tabs_->addTab(attention_, tr("Attention"));
  tabs_->addTab(routingTab_, tr("Routing"));
  tabs_->addTab(compare_, tr("Compare"));
  tabs_->addTab(messages_, tr("Output"));
  auto* centre = new QWidget(this);
  auto* layout = new QVBoxLayout(centre);
  promptBar_ = new PromptBar(centre);
  layout->addWidget(promptBar_);
  layout->addWidget(tabs_, 1);
  setCentralWidget(centre);
}

void MainWindow::buildStatusBar() {
  progress_ = new QProgressBar(this);
  progress_->setMaximumWidth(240);
  progress_->setVisible(false);
  status_ = new QLabel(this);
  keepLabelFromWidening(status_);
  statusBar()->addWidget(status_, 1);
  statusBar()->addPermanentWidget(progress_);
  progressTimer_ = new QTimer(this);
  progressTimer_->setInterval(100);
  connect(progressTimer_, &QTimer::timeout, this, &MainWindow::pollProgress);
}

// The engine controller's signals: loading, runs and batches, the session, the engine's state.
void MainWindow::connectController() {
  connect(controller_, &EngineController::loadProgress, this,
          [this](const QString& what, int done, int total) {
            status_->setText(tr("Loading: %1").arg(what));
            progress_->setRange(0, total);
            progress_->setValue(done);
            enginePanel_->setJob(tr("Loading %1").arg(what), done, total);
          });
  connect(controller_, &EngineController::modelLoaded, this, &MainWindow::onModelLoaded);
  connect(controller_, &EngineController::loadFailed, this, [this](const QString& e) {
    message(tr("Loading failed: %1").arg(e));
    status_->setText(tr("Loading failed (see Output)."));
    enginePanel_->setModel(nullptr);
  });
  connect(controller_, &EngineController::runFinished, this, &MainWindow::onRunFinished);
  connect(controller_, &EngineController::batchFinished, this, &MainWindow::onBatchFinished);
  connect(controller_, &EngineController::replayFinished, this, &MainWindow::onReplayFinished);
  connect(controller_, &EngineController::sessionChanged, this, &MainWindow::refreshLog);
  connect(controller_, &EngineController::busyChanged, this, &MainWindow::onBusyChanged);
  connect(controller_, &EngineController::engineLost, this, &MainWindow::onEngineLost);
  connect(controller_, &EngineController::requestRefused, this,
          [this](const QString& why) { status_->setText(why); });
}

// The head sweep (its Top-k target, its runs, its grid) and the views' clicks.
void MainWindow::connectSweepAndViews() {
  connect(controller_, &EngineController::runFinished, sweep_, &SweepController::onRunFinished);
  connect(controller_, &EngineController::batchFinished, sweep_, &SweepController::onBatchFinished);
  connect(sweep_, &SweepController::targetNeeded, this, &MainWindow::runTopK);
  connect(sweep_, &SweepController::targetFound, this,
          [this](qint64 token) { promptBar_->setTarget("#" + QString::number(token)); });
  connect(sweep_, &SweepController::started, this,
          [this](const std::vector<ScriptRequest>& scripts) {
            sweepGrid_->setShape(sweep_->effects().rows, sweep_->effects().cols);
            tabs_->setCurrentWidget(sweepGrid_);
            submit(scripts);
          });
  connect(sweep_, &SweepController::effectsChanged, this,
          [this](const Matrix& effects, const QString& label) {
            sweepGrid_->setEffects(effects, label);
            headGrid_->setEffects(effects, label);
            tabs_->setCurrentWidget(sweepGrid_);
          });
  connect(headGrid_, &HeadGridView::cellClicked, this,
          [this](qint64 layer, qint64 head) { toggleHead(layer, head); });
  connect(routing_, &RoutingView::routeRequested, this, &MainWindow::runRouting);
  connect(routing_, &RoutingView::expertClicked, this,
          [this](qint64 layer, qint64 expert) { runExpertAblation(layer, expert); });
  connect(sweepGrid_, &HeadGridView::cellClicked, this, [this](qint64 layer, qint64 head) {
    if (auto id = sweepRun(layer)) {
      openRun(*id);
      message(tr("Sweep cell layer %1 head %2: change %3 (run %4)")
                  .arg(layer)
                  .arg(head)
                  .arg(sweepGrid_->effects().at(layer, head), 0, 'g', 4)
                  .arg(*id));
    }
  });
}

void MainWindow::connectPromptBar() {
  connect(promptBar_, &PromptBar::generateClicked, this, &MainWindow::runGeneration);
  connect(promptBar_, &PromptBar::stopClicked, this, &MainWindow::stop);
  connect(promptBar_, &PromptBar::readClicked, this, &MainWindow::readSelectedPort);
  connect(promptBar_, &PromptBar::zeroHeadsClicked, this, &MainWindow::runAblation);
  connect(promptBar_, &PromptBar::sweepClicked, this, [this] {
    const int64_t n = controller_->hasModel() ? controller_->model().numLayers : 0;
    runSweep(SweepController::parseLayers(promptBar_->sweepLayers(), n));
  });
  connect(promptBar_, &PromptBar::logitLensClicked, this, &MainWindow::runLogitLens);
  connect(promptBar_, &PromptBar::topKClicked, this, &MainWindow::runTopK);
  connect(promptBar_, &PromptBar::attentionClicked, this, [this] {
    // The selected module's layer; layer 0 when none is selected or it is outside the layers.
    const QModelIndex index = treeFilter_->mapToSource(treeView_->currentIndex());
    const int layer = index.isValid() ? tree_->data(index, ModuleTreeModel::LayerRole).toInt() : -1;
    runAttentionPattern(std::max(layer, 0), promptBar_->attentionHead());
  });
  connect(promptBar_->perHeadNorms(), &QCheckBox::toggled, this, [this] {
    if (shownRun_ && controller_->session()) openRun(shownRun_);
  });
}

void MainWindow::buildDocks() {
  tree_ = new ModuleTreeModel(this);
  treeFilter_ = new QSortFilterProxyModel(this);
  treeFilter_->setSourceModel(tree_);
  treeFilter_->setFilterRole(ModuleTreeModel::ModulePathRole);
  treeFilter_->setRecursiveFilteringEnabled(true);
  treeFilter_->setFilterCaseSensitivity(Qt::CaseInsensitive);
  auto* left = new QWidget(this);
  auto* leftLayout = new QVBoxLayout(left);
  filterEdit_ = new QLineEdit(left);
  filterEdit_->setPlaceholderText(tr("Filter modules (e.g. layers[1].self_attn)"));
  filterEdit_->setClearButtonEnabled(true);
  treeView_ = new QTreeView(left);
  treeView_->setModel(treeFilter_);
  treeView_->setUniformRowHeights(true);
  treeView_->header()->setSectionResizeMode(QHeaderView::ResizeToContents);
  leftLayout->addWidget(filterEdit_);
  leftLayout->addWidget(treeView_, 1);
  connect(filterEdit_, &QLineEdit::textChanged, this, [this](const QString& text) {
    treeFilter_->setFilterFixedString(text);
    if (!text.isEmpty()) treeView_->expandAll();
  });
  connect(treeView_, &QTreeView::doubleClicked, this, [this](const QModelIndex& index) {
    if (tree_->portAt(treeFilter_->mapToSource(index), nullptr)) readSelectedPort();
  });
  left->setMinimumWidth(300);
  QDockWidget* treeDock = addDock(tr("Modules"), "modules", left, Qt::LeftDockWidgetArea);

  enginePanel_ = new EnginePanel(this);
  addDock(tr("Engine"), "engine", enginePanel_, Qt::LeftDockWidgetArea);

  auto* scriptBox = new QWidget(this);
  auto* scriptLayout = new QVBoxLayout(scriptBox);
  editor_ = new ScriptEditor(scriptBox);
  errorLabel_ = new QLabel(scriptBox);
  errorLabel_->setWordWrap(true);
  errorLabel_->setStyleSheet("color: #c62828");
  auto* runScript = new QPushButton(tr("Run script (Ctrl+Return)"), scriptBox);
  scriptLayout->addWidget(editor_, 1);
  scriptLayout->addWidget(errorLabel_);
  scriptLayout->addWidget(runScript);
  connect(runScript, &QPushButton::clicked, this, &MainWindow::runEditorScript);
  scriptBox->setMinimumWidth(360);
  QDockWidget* scriptDock = addDock(tr("Script"), "script", scriptBox, Qt::RightDockWidgetArea);

  logModel_ = new SessionLogModel(this);
  auto* logBox = new QWidget(this);
  auto* logLayout = new QVBoxLayout(logBox);
  logView_ = new QTableView(logBox);
  logView_->setModel(logModel_);
  logView_->setSelectionBehavior(QAbstractItemView::SelectRows);
  logView_->setSelectionMode(QAbstractItemView::ExtendedSelection);  // two runs for Compare
  logView_->horizontalHeader()->setSectionResizeMode(SessionLogModel::TitleColumn,
                                                     QHeaderView::Stretch);
  logView_->verticalHeader()->hide();
  auto* logButtons = new QHBoxLayout;
  auto* open = new QPushButton(tr("Open"), logBox);
  auto* replay = new QPushButton(tr("Replay"), logBox);
  auto* exportValues = new QPushButton(tr("Export values..."), logBox);
  auto* compare = new QPushButton(tr("Compare"), logBox);
  compare->setObjectName("compareRuns");
  compare->setToolTip(
      tr("Select two runs (Ctrl+click) to see how their saved values and "
         "generations differ"));
  auto* exportPlot = new QPushButton(tr("Export plot..."), logBox);
  auto* exportCsv = new QPushButton(tr("Export CSV..."), logBox);
  for (QPushButton* b : {open, replay, compare, exportValues, exportPlot, exportCsv})
    logButtons->addWidget(b);
  logButtons->addStretch(1);
  logLayout->addWidget(logView_, 1);
  logLayout->addLayout(logButtons);
  const auto selectedRun = [this]() -> int64_t {
    const auto* r = logModel_->runAt(logView_->currentIndex().row());
    return r ? r->id : 0;
  };
  connect(open, &QPushButton::clicked, this, [this, selectedRun] {
    if (const int64_t id = selectedRun()) openRun(id);
  });
  connect(logView_, &QTableView::doubleClicked, this, [this, selectedRun] {
    if (const int64_t id = selectedRun()) openRun(id);
  });
  connect(replay, &QPushButton::clicked, this, [this, selectedRun] {
    if (const int64_t id = selectedRun()) replayRun(id);
  });
  connect(compare, &QPushButton::clicked, this, &MainWindow::compareSelectedRuns);
  connect(exportValues, &QPushButton::clicked, this, &MainWindow::exportValues);
  connect(exportPlot, &QPushButton::clicked, this, &MainWindow::exportPlot);
  connect(exportCsv, &QPushButton::clicked, this, &MainWindow::exportCsv);
  QDockWidget* logDock = addDock(tr("Session log"), "session", logBox, Qt::BottomDockWidgetArea);
  resizeDocks({treeDock, scriptDock}, {360, 440}, Qt::Horizontal);
  resizeDocks({logDock}, {200}, Qt::Vertical);
}

void MainWindow::closeEvent(QCloseEvent* event) {
  QSettings settings;
  settings.setValue("window/geometry", saveGeometry());
  settings.setValue("window/state", saveState());
  controller_->stop();
  event->accept();
}

void MainWindow::message(const QString& text) {
  messages_->appendPlainText(text);
}

QString MainWindow::statusText() const {
  return status_->text();
}

void MainWindow::setPrompts(const QStringList& prompts) {
  promptBar_->setPrompts(prompts);
}
void MainWindow::setMaxTokens(int n) {
  promptBar_->setMaxTokens(n);
}
void MainWindow::setTarget(const QString& target) {
  promptBar_->setTarget(target);
}
QCheckBox* MainWindow::perHeadNorms() const {
  return promptBar_->perHeadNorms();
}

std::optional<int64_t> MainWindow::sweepRun(int64_t layer) const {
  return sweep_->runOf(layer);
}

GenerationSettings MainWindow::settings() const {
  return promptBar_->settings();
}

void MainWindow::openModel(const EngineOptions& options) {
  modelOptions_ = options;
  EngineSource source;
  source.local = options;
  openSource(source, QString::fromStdString(options.model.empty() ? "demo" : options.model));
}

void MainWindow::connectEngine(const QString& address, const QString& tokenFile) {
  engineAddress_ = address;
  engineTokenFile_ = tokenFile;
  EngineSource source;
  source.address = address.toStdString();
  source.tokenFile = tokenFile.toStdString();
  openSource(source, tr("the engine at %1").arg(address));
}

void MainWindow::reconnectEngine() {
  if (controller_->busy()) {
    status_->setText(tr("The engine is busy; wait for the running job or press Stop."));
    return;
  }
  status_->setText(tr("Reconnecting..."));
  tree_->setModel(ModelInfo{}, {});
  enginePanel_->setModel(nullptr);
  enginePanel_->setEngine({});
  controller_->reconnect();
}

void MainWindow::openSource(const EngineSource& source, const QString& what) {
  if (controller_->busy()) {
    status_->setText(tr("The engine is busy; wait for the running job or press Stop."));
    return;
  }
  tree_->setModel(ModelInfo{}, {});
  enginePanel_->setModel(nullptr);
  enginePanel_->setEngine({});
  status_->setText(tr("Loading %1...").arg(what));
  controller_->open(source);
}

void MainWindow::onEngineLost(const QString& why) {
  message(tr("Engine lost: %1").arg(why));
  enginePanel_->setEngine(controller_->engineText(), /*lost=*/true);
  status_->setText(tr("Engine lost (see the Engine panel); File > Reconnect to engine."));
}

QString MainWindow::openSession(const QString& path) {
  const QString error = controller_->openSession(path);
  if (error.isEmpty()) {
    QSettings().setValue("session/file", path);
    setWindowTitle(tr("ShardScope - %1").arg(QFileInfo(path).fileName()));
  }
  return error;
}

void MainWindow::onModelLoaded() {
  const ModelInfo& m = controller_->model();
  tree_->setModel(m, controller_->portShapes());
  treeView_->expandToDepth(1);
  enginePanel_->setModel(&m);
  enginePanel_->setEngine(controller_->engineText());
  message(tr("Model %1 runs on %2").arg(QString::fromStdString(m.spec), controller_->engineText()));
  headGrid_->setShape(m.numLayers, m.numHeads);
  sweepGrid_->setShape(m.numLayers, m.numHeads);
  promptBar_->setHeadCount(m.numHeads);
  ablated_.clear();
  sweep_->setModel(m);
  status_->setText(tr("Loaded %1 (tp=%2, %3, %4).")
                       .arg(QString::fromStdString(m.spec))
                       .arg(m.tp)
                       .arg(QString::fromStdString(m.device))
                       .arg(QString::fromStdString(m.dtype)));
}

bool MainWindow::selectPort(const std::string& module, const std::string& port) {
  const QModelIndex index = treeFilter_->mapFromSource(tree_->indexOfPort(module, port));
  if (!index.isValid()) return false;
  treeView_->scrollTo(index);
  treeView_->setCurrentIndex(index);
  return true;
}

void MainWindow::stop() {
  sweep_->cancel();
  controller_->stop();
  status_->setText(tr("Stopping..."));
}

void MainWindow::onBusyChanged(bool busy) {
  promptBar_->setBusy(busy);
  progress_->setVisible(busy);
  if (busy) {
    progressTimer_->start();
  } else {
    progressTimer_->stop();
    enginePanel_->setJob({}, 0, 0);
  }
}

void MainWindow::pollProgress() {
  const JobProgress p = controller_->progress();
  const auto [index, size] = controller_->batchProgress();
  QString what = currentJob_;
  if (size > 1) what = tr("%1 (script %2 of %3)").arg(what).arg(index + 1).arg(size);
  if (size > 1) {
    progress_->setRange(0, size);
    progress_->setValue(index);
  } else {
    progress_->setRange(0, int(std::max<int64_t>(p.total, 1)));
    progress_->setValue(int(p.step));
  }
  status_->setText(tr("Running %1: step %2 of %3").arg(what).arg(p.step).arg(p.total));
  enginePanel_->setJob(what, p.step, p.total);
}

void MainWindow::onRunFinished(const std::shared_ptr<const RunOutcome>& o) {
  if (o->status != store::RunStatus::Done) {
    const QString e = QString::fromStdString(o->error), status = store::runStatusName(o->status);
    message(tr("Run %1 (%2) %3: %4")
                .arg(o->runId)
                .arg(QString::fromStdString(o->title))
                .arg(status)
                .arg(e));
    errorLabel_->setText(o->errorLine ? tr("Line %1: %2").arg(o->errorLine).arg(e) : e);
    if (o->errorLine) editor_->markError(o->errorLine, o->errorColumn);
    status_->setText(tr("%1 %2.").arg(QString::fromStdString(o->title)).arg(status));
    return;
  }
  status_->setText(tr("%1: done in %2 s (run %3; traces %4).")
                       .arg(QString::fromStdString(o->title))
                       .arg(o->seconds, 0, 'f', 2)
                       .arg(o->runId)
                       .arg(ui::traceTimeText(o->result)));
  showResult(o->runId, o->title, o->view, o->result);
}

void MainWindow::onBatchFinished(bool cancelled) {
  if (controller_->engineIsLost()) {
    status_->setText(tr("Engine lost (see the Engine panel); File > Reconnect to engine."));
  } else if (cancelled) {
    status_->setText(tr("Stopped."));
  }
}

void MainWindow::refreshLog() {
  if (auto* s = controller_->session()) {
    try {
      logModel_->setRuns(s->runs());
      logView_->scrollToBottom();
    } catch (const std::exception& e) {
      message(QString::fromStdString(e.what()));
    }
  }
}

}  // namespace shardscope::ui
