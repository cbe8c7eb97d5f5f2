// MainWindow, second half: drawing a run's results from what it saved (live, or opened from the
// session log), replay reports, and exporting values, plots and numbers.
#include <qcustomplot.h>
#include <QCheckBox>
#include <QFile>
#include <QFileDialog>
#include <QItemSelectionModel>
#include <QLabel>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QTabWidget>
#include <QTableView>

#include "core/model/tokenizer.h"
#include "core/store/replay.h"
#include "core/store/value_export.h"
#include "head_grid_view.h"
#include "heatmap_view.h"
#include "logit_lens_view.h"
#include "main_window.h"
#include "output_diff_view.h"
#include "plot_tools.h"
#include "routing_view.h"
#include "run_comparison_view.h"
#include "saved_values.h"
#include "script_editor.h"
#include "session_log_model.h"
#include "sweep_controller.h"
#include "top_k_view.h"

namespace shardscope::ui {

QString MainWindow::tokenText(int64_t id) const {
  auto tok = controller_->tokenizer();
  return tok ? QString::fromStdString(tok->tokenPiece(id)) : QString("#%1").arg(id);
}

QStringList MainWindow::tokenLabels(const std::vector<int64_t>& ids) const {
  QStringList labels;
  for (int64_t id : ids) labels << tokenText(id);
  return labels;
}

void MainWindow::showResult(int64_t runId, const std::string& title, const store::RunView& view,
                            const trace::RunResult& r) {
  shownRun_ = runId;
  QStringList texts;
  for (const auto& t : r.traces) {
    for (const auto& inv : t.invokes) texts << QString::fromStdString(inv.text);
  }
  if (!r.printed.empty()) message(QString::fromStdString(r.printed).trimmed());
  const bool expertAblation = view.kind == store::RunView::Kind::ExpertAblation;
  if (findValue(r, "baseline_logits") && findValue(r, "ablated_logits")) {
    showAblation(r, expertAblation ? routingDiff_ : diff_,
                 expertAblation ? routingTab_ : headsTab_);
  } else if (const auto routing = expertRoutingOf(r)) {
    showRouting(*routing, r);
  } else if (SweepController::isLayerRun(r)) {
    sweep_->addLayerRun(runId, view, r);
  } else if (findValue(r, "lens[0][0]")) {
    showLens(r);
  } else if (findValue(r, "q_head") && findValue(r, "k_head")) {
    showAttention(title, r);
  } else if (findValue(r, "value_0")) {
    showRead(title, view, r);
  } else if (const trace::SavedValue* logits = findValue(r, "logits_0")) {
    diff_->setOutputs(texts);
    showTopK(*logits);
  } else {
    diff_->setOutputs(texts);
    tabs_->setCurrentWidget(messages_);
  }
  Q_EMIT resultShown(runId);
}

void MainWindow::showRead(const std::string& title, const store::RunView& view,
                          const trace::RunResult& r) {
  const trace::SavedValue* v = findValue(r, "value_0");
  Matrix m = asMatrix(v->tensor);
  QString columns = tr("feature");
  // Attention ports: a self_attn port as wide as all query heads (o_proj.input, attn.output).
  const bool read = view.kind == store::RunView::Kind::Read;
  const bool attentionPort = read && view.port.find(".self_attn.") != std::string::npos;
  if (perHeadNorms()->isChecked() && attentionPort && controller_->hasModel()) {
    const int64_t heads = controller_->model().numHeads;
    if (m.cols == heads * controller_->model().headDim) {
      m = ui::perHeadNorms(m, heads);
      columns = tr("head (L2 norm)");
    }
  }
  QStringList rows;
  if (const auto* inv = invoke(r, 0)) {
    const int64_t step = read ? view.step : 0;
    if (step == 0)
      rows = tokenLabels(inv->promptIds);
    else if (step > 0 && step - 1 < int64_t(inv->tokenIds.size()))
      rows = tokenLabels({inv->tokenIds[size_t(step - 1)]});
  }
  heatmap_->setMatrix(QString::fromStdString(title), m, rows, columns);
  tabs_->setCurrentWidget(heatmap_);
}

void MainWindow::showAblation(const trace::RunResult& r, OutputDiffView* diff, QWidget* tab) {
  const auto* base = invoke(r, 0);
  const auto* ablated = invoke(r, 1);
  const auto pb = lastRowProbabilities(*findValue(r, "baseline_logits"));
  const auto pa = lastRowProbabilities(*findValue(r, "ablated_logits"));
  const int64_t target = resolveTarget(&r).value_or(0);
  if (base && ablated && target < int64_t(pb.size())) {
    diff->setComparison(base->tokenIds, ablated->tokenIds, controller_->tokenizer(),
                        tokenText(target), pb[size_t(target)], pa[size_t(target)]);
  }
  tabs_->setCurrentWidget(tab);
}

void MainWindow::showRouting(const ExpertRouting& routing, const trace::RunResult& r) {
  const auto* inv = invoke(r, 0);
  const int64_t experts = controller_->hasModel() ? controller_->model().numExperts : 0;
  routing_->setRouting(routing, inv ? tokenLabels(inv->promptIds) : QStringList(),
                       std::max<int64_t>(experts, 1 + maxExpert(routing)));
  tabs_->setCurrentWidget(routingTab_);
}

void MainWindow::showLens(const trace::RunResult& r) {
  Matrix p;
  std::vector<std::vector<QString>> tokens;
  for (int64_t l = 0;; ++l) {
    const std::string base = "lens[" + std::to_string(l) + "]";
    const trace::SavedValue* probs = findValue(r, base + "[0]");
    const trace::SavedValue* ids = findValue(r, base + "[1]");
    if (!probs || !ids) break;
    const auto row = asMatrix(probs->tensor);
    p.cols = row.rows * row.cols;
    p.data.insert(p.data.end(), row.data.begin(), row.data.end());
    ++p.rows;
    std::vector<QString> names;
    for (int64_t id : ids->tensor.toInt64()) names.push_back(tokenText(id));
    tokens.push_back(names);
  }
  const auto* inv = invoke(r, 0);
  lens_->setLens(p, tokens, inv ? tokenLabels(inv->promptIds) : QStringList{});
  tabs_->setCurrentWidget(lens_);
}

void MainWindow::showAttention(const std::string& title, const trace::RunResult& r) {
  const Matrix pattern = attentionPattern(asMatrix(findValue(r, "q_head")->tensor),
                                          asMatrix(findValue(r, "k_head")->tensor));
  const auto* inv = invoke(r, 0);
  attention_->setMatrix(QString::fromStdString(title), pattern,
                        inv ? tokenLabels(inv->promptIds) : QStringList{}, tr("key token"), false);
  tabs_->setCurrentWidget(attention_);
}

void MainWindow::showTopK(const trace::SavedValue& logits) {
  std::vector<std::pair<QString, double>> bars;
  for (const auto& [id, p] : ui::topK(lastRowProbabilities(logits), 10))
    bars.emplace_back(tokenText(id).toHtmlEscaped(), p);
  topK_->setTokens(bars, tr("next token (first invoke, step 0)"));
  tabs_->setCurrentWidget(topK_);
}

void MainWindow::openRun(int64_t runId) {
  store::SessionStore* s = controller_->session();
  if (!s) return;
  try {
    const store::RunRecord r = s->run(runId);
    const int row = logModel_->rowOfRun(runId);
    if (row >= 0) logView_->selectRow(row);
    if (r.summary.status != store::RunStatus::Done) {
      message(tr("Run %1 is %2: %3")
                  .arg(runId)
                  .arg(QString::fromLatin1(store::runStatusName(r.summary.status)))
                  .arg(QString::fromStdString(r.summary.error)));
    }
    editor_->setPlainText(QString::fromStdString(r.script));
    showResult(runId, r.summary.title, r.summary.view, r.result);
  } catch (const std::exception& e) {
    message(QString::fromStdString(e.what()));
  }
}

void MainWindow::replayRun(int64_t runId) {
  currentJob_ = tr("Replay of run %1").arg(runId);
  controller_->replay(runId);
}

void MainWindow::onReplayFinished(const std::shared_ptr<const ReplayOutcome>& o) {
  if (!o->error.empty()) {
    message(tr("Replay failed: %1").arg(QString::fromStdString(o->error)));
    status_->setText(tr("Replay failed (see Output)."));
    tabs_->setCurrentWidget(messages_);
    return;
  }
  const store::ReplayReport& r = o->report;
  message(tr("Replay of run %1 (recorded as run %2): %3")
              .arg(r.runId)
              .arg(r.replayId)
              .arg(r.identical() ? tr("identical") : tr("DIFFERS")));
  for (const auto& n : r.notes) message("  note: " + QString::fromStdString(n));
  for (const auto& v : r.values)
    message(QString("  %1: %2")
                .arg(QString::fromStdString(v.name), QString::fromStdString(v.diff.detail)));
  for (const auto& t : r.texts)
    message(
        QString("  invoke %1 text %2").arg(t.invoke).arg(t.same ? tr("matches") : tr("differs")));
  status_->setText(
      tr("Replay of run %1: %2").arg(r.runId).arg(r.identical() ? tr("identical") : tr("differs")));
  tabs_->setCurrentWidget(messages_);
  Q_EMIT replayShown(r.identical());
}

QString MainWindow::saveValues(const QString& path) {
  if (!shownRun_ || !controller_->session()) return tr("No run is shown.");
  try {
    const auto report = store::exportRun(*controller_->session(), shownRun_, path.toStdString());
    message(tr("Wrote %1 tensors to %2").arg(report.written.size()).arg(path));
    return {};
  } catch (const std::exception& e) {
    return QString::fromStdString(e.what());
  }
}

QCustomPlot* MainWindow::currentPlot() const {
  QWidget* current = tabs_->currentWidget();
  if (current == heatmap_) return heatmap_->plot();
  if (current == attention_) return attention_->plot();
  if (current == sweepGrid_) return sweepGrid_->plot();
  if (current == lens_) return lens_->plot();
  if (current == topK_) return topK_->plot();
  if (current == headsTab_) return headGrid_->plot();
  if (current == routingTab_) return routing_->plot();
  if (current == compare_) return compare_->heatmap()->plot();
  return nullptr;
}

QString MainWindow::savePlot(const QString& path) {
  QCustomPlot* plot = currentPlot();
  if (!plot) return tr("The current tab has no plot.");
  return ui::savePlot(plot, path);
}

void MainWindow::copyPlot() {
  if (QCustomPlot* plot = currentPlot()) {
    ui::copyPlot(plot);
    status_->setText(tr("Copied the plot to the clipboard."));
  } else {
    status_->setText(tr("The current tab has no plot."));
  }
}

void MainWindow::compareSelectedRuns() {
  std::vector<int64_t> ids;
  for (const QModelIndex& index : sessionLogView()->selectionModel()->selectedRows()) {
    if (const auto* r = logModel_->runAt(index.row())) ids.push_back(r->id);
  }
  if (ids.size() != 2) {
    status_->setText(tr("Select two runs in the session log (Ctrl+click) to compare them."));
    return;
  }
  std::sort(ids.begin(), ids.end());
  compareRuns(ids[0], ids[1]);
}

void MainWindow::compareRuns(int64_t a, int64_t b) {
  store::SessionStore* s = controller_->session();
  if (!s) return;
  std::shared_ptr<const Tokenizer> tokenizer;
  if (controller_->hasModel()) tokenizer = controller_->tokenizer();
  try {
    compare_->setComparison(s->run(a), s->run(b), store::compareRuns(*s, a, b), tokenizer);
  } catch (const std::exception& e) {
    message(tr("Comparing runs %1 and %2 failed: %3").arg(a).arg(b).arg(e.what()));
    status_->setText(tr("Comparing runs failed (see Output)."));
    return;
  }
  tabs_->setCurrentWidget(compare_);
  status_->setText(compare_->summary().section('\n', 0, 0));
}

QString MainWindow::saveCsv(const QString& path) {
  const HeatmapView* view = tabs_->currentWidget() == attention_ ? attention_ : heatmap_;
  QFile f(path);
  if (!f.open(QIODevice::WriteOnly) || f.write(view->toCsv().toUtf8()) < 0)
    return tr("Could not write %1").arg(path);
  return {};
}

void MainWindow::exportTo(const QString& title, const QString& suggested, const QString& filter,
                          QString (MainWindow::*save)(const QString&)) {
  const QString path = QFileDialog::getSaveFileName(this, title, suggested, filter);
  if (path.isEmpty()) return;
  const QString error = (this->*save)(path);
  if (!error.isEmpty()) QMessageBox::warning(this, title, error);
}

void MainWindow::exportValues() {
  exportTo(tr("Export values"), QString("run-%1.safetensors").arg(shownRun_),
           tr("safetensors (*.safetensors)"), &MainWindow::saveValues);
}

void MainWindow::exportPlot() {
  exportTo(tr("Export plot"), "plot.png", tr("PNG (*.png);;SVG (*.svg);;PDF (*.pdf)"),
           &MainWindow::savePlot);
}

void MainWindow::exportCsv() {
  exportTo(tr("Export CSV"), "values.csv", tr("CSV (*.csv)"), &MainWindow::saveCsv);
}

}  // namespace shardscope::ui
