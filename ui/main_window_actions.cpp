// MainWindow's run actions: each builds its script (ScriptBuilder) from the selection, the prompt
// bar and the head grid, and submits it to the engine; the results come back to
// main_window_results.cpp.
#include <QLabel>
#include <QSortFilterProxyModel>
#include <QTreeView>

#include "core/model/tokenizer.h"
#include "engine_panel.h"
#include "expert_routing.h"
#include "head_grid_view.h"
#include "main_window.h"
#include "module_tree_model.h"
#include "prompt_bar.h"
#include "result_math.h"
#include "saved_values.h"
#include "script_builder.h"
#include "script_editor.h"
#include "sweep_controller.h"

namespace shardscope::ui {

void MainWindow::submit(std::vector<ScriptRequest> scripts) {
  if (scripts.empty()) return;
  if (controller_->busy()) {
    status_->setText(tr("The engine is busy; wait for the running job or press Stop."));
    return;
  }
  editor_->setPlainText(QString::fromStdString(scripts.front().script));
  editor_->markError(0, 0);
  errorLabel_->clear();
  currentJob_ = QString::fromStdString(scripts.front().title);
  controller_->runScripts(std::move(scripts));
}

void MainWindow::readSelectedPort() {
  if (!controller_->hasModel()) return;
  PortRef port;
  std::string kind;
  if (!tree_->portAt(treeFilter_->mapToSource(treeView_->currentIndex()), &port, &kind)) {
    status_->setText(tr("Select a port (an .input or .output row) in the module tree first."));
    return;
  }
  const ScriptBuilder b(controller_->model());
  const std::string title = "Read " + port.module + "." + port.port + " [" + kind + "] step " +
                            std::to_string(promptBar_->step());
  submit({{b.readPort(port, promptBar_->step(), settings()), title,
           store::RunView::read(port.module + "." + port.port, promptBar_->step())}});
}

void MainWindow::runGeneration() {
  if (!controller_->hasModel()) return;
  submit({{ScriptBuilder(controller_->model()).generate(settings()), "Generate",
           store::RunView::of(store::RunView::Kind::Generate)}});
}

void MainWindow::toggleHead(int64_t layer, int64_t head) {
  auto& set = ablated_[layer];
  if (!set.erase(head)) set.insert(head);
  if (set.empty()) ablated_.erase(layer);
  headGrid_->setAblated(ablated_);
  if (!controller_->hasModel()) return;
  // The editor shows the script that Zero heads would run.
  editor_->setPlainText(
      QString::fromStdString(ScriptBuilder(controller_->model()).zeroHeads(ablated_, settings())));
}

void MainWindow::runAblation() {
  if (!controller_->hasModel()) return;
  if (ablated_.empty()) {
    status_->setText(tr("Click heads in the Heads grid to choose which to zero."));
    return;
  }
  QStringList parts;
  for (const auto& [layer, heads] : ablated_) {
    QStringList hs;
    for (int64_t h : heads) hs << QString("H%1").arg(h);
    parts << QString("L%1:%2").arg(layer).arg(hs.join(','));
  }
  submit({{ScriptBuilder(controller_->model()).zeroHeads(ablated_, settings()),
           "Zero heads " + parts.join("; ").toStdString(),
           store::RunView::of(store::RunView::Kind::HeadAblation)}});
}

void MainWindow::runRouting() {
  if (!controller_->hasModel()) return;
  const std::vector<int64_t> layers = sparseLayers(controller_->model());
  if (layers.empty()) {
    status_->setText(tr("This model has no MoE layers to route (Qwen3-MoE has)."));
    return;
  }
  submit({{ScriptBuilder(controller_->model()).routing(layers, settings()), "Routing",
           store::RunView::of(store::RunView::Kind::Routing)}});
}

void MainWindow::runExpertAblation(int64_t layer, int64_t expert) {
  if (!controller_->hasModel()) return;
  submit({{ScriptBuilder(controller_->model()).ablateExpert(layer, expert, settings()),
           "Ablate expert " + std::to_string(expert) + " of layer " + std::to_string(layer),
           store::RunView::expertAblation(layer, expert)}});
}

std::optional<int64_t> MainWindow::resolveTarget(const trace::RunResult* baseline) const {
  const QString text = promptBar_->target();
  if (text.startsWith('#')) return text.mid(1).toLongLong();
  if (!text.isEmpty()) {
    if (auto tok = controller_->tokenizer()) {
      const auto ids = tok->encode(text.toStdString(), /*addSpecialTokens=*/false);
      if (!ids.empty()) return ids.front();
    }
    return std::nullopt;
  }
  if (baseline) {
    if (const trace::SavedValue* v = findValue(*baseline, "baseline_logits")) {
      const auto p = lastRowProbabilities(*v);
      return ui::topK(p, 1).front().first;
    }
  }
  return std::nullopt;
}

void MainWindow::runSweep(const std::vector<int64_t>& layers) {
  if (!controller_->hasModel()) return;
  sweep_->start(layers, resolveTarget(nullptr), settings());
}

void MainWindow::runLogitLens() {
  if (!controller_->hasModel()) return;
  submit({{ScriptBuilder(controller_->model()).logitLens(settings()), "Logit lens",
           store::RunView::of(store::RunView::Kind::LogitLens)}});
}

void MainWindow::runTopK() {
  if (!controller_->hasModel()) return;
  GenerationSettings g = settings();
  g.maxTokens = 1;
  g.prompts.resize(1);
  submit({{ScriptBuilder(controller_->model()).generate(g), "Top-k",
           store::RunView::of(store::RunView::Kind::TopK)}});
}

void MainWindow::runAttentionPattern(int64_t layer, int64_t head) {
  if (!controller_->hasModel()) return;
  submit({{ScriptBuilder(controller_->model()).attentionPattern(layer, head, settings()),
           "Attention pattern layer " + std::to_string(layer) + " head " + std::to_string(head),
           store::RunView::attentionPattern(layer, head)}});
}

void MainWindow::runEditorScript() {
  if (!controller_->hasModel()) return;
  const std::string script = editor_->toPlainText().toStdString();
  if (controller_->busy()) return;
  editor_->markError(0, 0);
  errorLabel_->clear();
  currentJob_ = tr("Script");
  controller_->runScripts({{script, "Script", {}}});
}

}  // namespace shardscope::ui
