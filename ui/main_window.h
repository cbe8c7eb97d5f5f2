// MainWindow: coordinates the views. Module tree and engine panel on the left, the prompt bar
// on top, result views in the centre, the script editor on the right and the session log below.
// Every action builds a trace script (ScriptBuilder), shows it in the editor and runs it through
// the EngineController; results come back by signal and are drawn by what the run saved, so a run
// opened from the session log draws the same way without running.
#pragma once

#include <QMainWindow>
#include <memory>
#include <optional>

#include "core/engine/engine_types.h"
#include "engine_controller.h"
#include "script_builder.h"

class QCheckBox;
class QCustomPlot;
class QDockWidget;
class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QProgressBar;
class QSortFilterProxyModel;
class QTabWidget;
class QTableView;
class QTimer;
class QTreeView;

namespace shardscope::examples {
struct Example;
}

namespace shardscope::ui {

struct ExpertRouting;

class EnginePanel;
class HeadGridView;
class HeatmapView;
class LogitLensView;
class ModuleTreeModel;
class OutputDiffView;
class PromptBar;
class RoutingView;
class RunComparisonView;
class ScriptEditor;
class SessionLogModel;
class SweepController;
class TopKView;

struct StartOptions {
  EngineOptions model;  // spec "" = demo
  QString engine;       // HOST:PORT: the model of this engine server instead of `model`
  QString tokenFile;    // the engine server's access token file (empty: none)
  QString sessionFile;  // empty: the remembered one, else the default in the data folder
  bool restoreState = true;
};

class MainWindow : public QMainWindow {
  Q_OBJECT
 public:
  explicit MainWindow(StartOptions options, QWidget* parent = nullptr);
  ~MainWindow() override;

  // Actions (menus, buttons and tests call these).
  void openModel(const EngineOptions& options);
  // Opens the model of a shardscope-engine server at `address` (HOST:PORT); `tokenFile` holds its
  // access token (empty: none). Reconnect opens the last engine again, after "engine lost".
  void connectEngine(const QString& address, const QString& tokenFile);
  void reconnectEngine();
  QString openSession(const QString& path);
  bool selectPort(const std::string& module, const std::string& port);
  void readSelectedPort();
  void toggleHead(int64_t layer, int64_t head);
  void runAblation();
  void runSweep(const std::vector<int64_t>& layers);
  // MoE: the routing of the first prompt, and an expert's ablation (its router logit -inf).
  void runRouting();
  void runExpertAblation(int64_t layer, int64_t expert);
  void runLogitLens();
  void runTopK();
  void runAttentionPattern(int64_t layer, int64_t head);
  void runGeneration();
  void runEditorScript();
  void stop();
  void openRun(int64_t runId);
  void replayRun(int64_t runId);
  // Runs `b` against run `a` of the open session (the session log's Compare), in the Compare tab.
  void compareRuns(int64_t a, int64_t b);
  // Loads an example script (File > Examples) into the script editor.
  void loadExample(const examples::Example& example);
  // Exports of the shown run and the current plot; each returns an error message, or empty.
  QString saveValues(const QString& path);
  QString savePlot(const QString& path);
  QString saveCsv(const QString& path);
  // The plot of the current tab (nullptr when it has none) and a copy of it on the clipboard.
  QCustomPlot* currentPlot() const;
  void copyPlot();

  // State, for tests and the screenshot tour.
  EngineController* controller() const { return controller_; }
  SweepController* sweep() const { return sweep_; }
  ScriptEditor* editor() const { return editor_; }
  HeatmapView* heatmap() const { return heatmap_; }
  HeadGridView* headGrid() const { return headGrid_; }
  HeadGridView* sweepGrid() const { return sweepGrid_; }
  RoutingView* routingView() const { return routing_; }
  OutputDiffView* routingDiff() const { return routingDiff_; }
  OutputDiffView* outputView() const { return diff_; }
  LogitLensView* logitLens() const { return lens_; }
  TopKView* topK() const { return topK_; }
  HeatmapView* attention() const { return attention_; }
  EnginePanel* enginePanel() const { return enginePanel_; }
  SessionLogModel* sessionLog() const { return logModel_; }
  QTableView* sessionLogView() const { return logView_; }
  RunComparisonView* comparison() const { return compare_; }
  QTreeView* moduleTree() const { return treeView_; }
  QTabWidget* tabs() const { return tabs_; }
  QPlainTextEdit* messages() const { return messages_; }
  QCheckBox* perHeadNorms() const;
  const HeadSet& ablatedHeads() const { return ablated_; }
  void setPrompts(const QStringList& prompts);
  void setMaxTokens(int n);
  void setTarget(const QString& target);
  QString statusText() const;
  std::optional<int64_t> sweepRun(int64_t layer) const;

 Q_SIGNALS:
  // Emitted after a run's results are drawn (live or opened from the log).
  void resultShown(qint64 runId);
  void replayShown(bool identical);

 protected:
  void closeEvent(QCloseEvent* event) override;

 private:
  void buildCentre();
  void buildStatusBar();
  void buildMenus();
  void connectPromptBar();
  void connectController();
  void connectSweepAndViews();
  void buildDocks();
  GenerationSettings settings() const;
  void submit(std::vector<ScriptRequest> scripts);
  void onModelLoaded();
  void onEngineLost(const QString& why);
  // Clears the views of the old model and opens `source` (`what` names it in the status bar).
  void openSource(const EngineSource& source, const QString& what);
  void onRunFinished(const std::shared_ptr<const RunOutcome>& outcome);
  void onBatchFinished(bool cancelled);
  void onReplayFinished(const std::shared_ptr<const ReplayOutcome>& outcome);
  void onBusyChanged(bool busy);
  void refreshLog();
  void pollProgress();
  // `view`: what the GUI made the run for (none for the editor's scripts: the saved values' names
  // choose the view then).
  void showResult(int64_t runId, const std::string& title, const store::RunView& view,
                  const trace::RunResult& result);
  void showRead(const std::string& title, const store::RunView& view, const trace::RunResult& r);
  // `diff` is the comparison view to fill, `tab` the tab holding it.
  void showAblation(const trace::RunResult& r, OutputDiffView* diff, QWidget* tab);
  void showRouting(const ExpertRouting& routing, const trace::RunResult& r);
  void showLens(const trace::RunResult& r);
  void showAttention(const std::string& title, const trace::RunResult& r);
  void showTopK(const trace::SavedValue& logits);
  QStringList tokenLabels(const std::vector<int64_t>& ids) const;
  QString tokenText(int64_t id) const;
  std::optional<int64_t> resolveTarget(const trace::RunResult* baseline) const;
  void message(const QString& text);
  // Asks for a file, calls `save` (one of the save* functions) and shows its error, if any.
  void exportTo(const QString& title, const QString& suggested, const QString& filter,
                QString (MainWindow::*save)(const QString&));
  void exportValues();
  void exportPlot();
  void exportCsv();
  // A dock holding `widget`, named for the saved window state.
  QDockWidget* addDock(const QString& title, const char* name, QWidget* widget,
                       Qt::DockWidgetArea area);
  void about();
  void compareSelectedRuns();

  EngineController* controller_;
  SweepController* sweep_;
  EngineOptions modelOptions_;
  QString engineAddress_, engineTokenFile_;  // the last Connect to engine
  ModuleTreeModel* tree_;
  QSortFilterProxyModel* treeFilter_;
  QTreeView* treeView_;
  QLineEdit* filterEdit_;
  EnginePanel* enginePanel_;
  PromptBar* promptBar_;
  QTabWidget* tabs_;
  HeatmapView* heatmap_;
  HeadGridView* headGrid_;
  OutputDiffView* diff_;
  HeadGridView* sweepGrid_;
  LogitLensView* lens_;
  TopKView* topK_;
  HeatmapView* attention_;
  RoutingView* routing_;
  OutputDiffView* routingDiff_;
  QWidget* routingTab_;
  RunComparisonView* compare_;
  QWidget* headsTab_;
  QPlainTextEdit* messages_;
  ScriptEditor* editor_;
  QLabel* errorLabel_;
  SessionLogModel* logModel_;
  QTableView* logView_;
  QProgressBar* progress_;
  QLabel* status_;
  QTimer* progressTimer_;
  HeadSet ablated_;
  int64_t shownRun_ = 0;
  QString currentJob_;
};

}  // namespace shardscope::ui
