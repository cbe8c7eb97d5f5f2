#include "sweep_controller.h"

#include <QStringList>
#include <limits>

#include "saved_values.h"

namespace shardscope::ui {

SweepController::SweepController(QObject* parent) : QObject(parent) {}

std::vector<int64_t> SweepController::parseLayers(const QString& text, int64_t numLayers) {
  std::vector<int64_t> layers;
  if (text.trimmed().isEmpty()) {
    for (int64_t l = 0; l < numLayers; ++l) layers.push_back(l);
    return layers;
  }
  for (const QString& part : text.split(',', Qt::SkipEmptyParts)) {
    const QStringList range = part.trimmed().split('-');
    const int64_t a = range[0].toLongLong(), b = range.size() > 1 ? range[1].toLongLong() : a;
    for (int64_t l = a; l <= b && l < numLayers; ++l) layers.push_back(l);
  }
  return layers;
}

bool SweepController::isLayerRun(const trace::RunResult& r) {
  return findValue(r, "baseline") && findValue(r, "head_0");
}

Matrix SweepController::blankEffects() const {
  const int64_t layers = model_ ? model_->numLayers : 0, heads = model_ ? model_->numHeads : 0;
  return Matrix{
      layers, heads,
      std::vector<double>(size_t(layers * heads), std::numeric_limits<double>::quiet_NaN())};
}

void SweepController::setModel(const ModelInfo& model) {
  model_ = model;
  effects_ = blankEffects();
  runs_.clear();
}

void SweepController::start(const std::vector<int64_t>& layers, std::optional<int64_t> target,
                            const GenerationSettings& settings) {
  if (!model_ || layers.empty()) return;
  if (!target) {  // find the greedy token first, then sweep
    pending_ = layers;
    pendingSettings_ = settings;
    foundTarget_.reset();  // only this lookup's answer counts
    Q_EMIT targetNeeded();
    return;
  }
  foundTarget_ = *target;
  const ScriptBuilder b(*model_);
  std::vector<ScriptRequest> scripts;
  for (int64_t l : layers) {
    scripts.push_back({b.sweepLayer(l, *target, settings),
                       "Sweep layer " + std::to_string(l) + " target " + std::to_string(*target),
                       store::RunView::sweepLayer(l, *target)});
  }
  effects_ = blankEffects();
  runs_.clear();
  Q_EMIT started(scripts);
}

void SweepController::cancel() {
  pending_.clear();
}

void SweepController::onRunFinished(const std::shared_ptr<const RunOutcome>& o) {
  if (o->status == store::RunStatus::Interrupted) pending_.clear();
  if (o->status != store::RunStatus::Done || pending_.empty() ||
      o->view.kind != store::RunView::Kind::TopK)
    return;
  if (const trace::SavedValue* v = findValue(o->result, "logits_0"))
    foundTarget_ = ui::topK(lastRowProbabilities(*v), 1).front().first;
}

void SweepController::onBatchFinished(bool cancelled) {
  if (cancelled) {
    pending_.clear();
    return;
  }
  if (pending_.empty()) return;
  const std::vector<int64_t> layers = std::move(pending_);
  pending_.clear();
  if (!foundTarget_) return;  // the lookup failed (its error is shown): no sweep
  const int64_t target = *foundTarget_;
  Q_EMIT targetFound(target);
  start(layers, target, pendingSettings_);
}

bool SweepController::addLayerRun(int64_t runId, const store::RunView& view,
                                  const trace::RunResult& r) {
  if (view.kind != store::RunView::Kind::SweepLayer || !model_ || !isLayerRun(r)) return false;
  const int64_t layer = view.layer;
  if (layer < 0 || layer >= model_->numLayers)
    return false;  // a run of a deeper model, opened from the log
  const int64_t heads = model_->numHeads;
  if (effects_.rows != model_->numLayers || effects_.cols != heads) effects_ = blankEffects();
  const double baseline = findValue(r, "baseline")->tensor.element(0);
  for (int64_t h = 0; h < heads; ++h) {
    if (const trace::SavedValue* v = findValue(r, "head_" + std::to_string(h)))
      effects_.data[size_t(layer * heads + h)] = v->tensor.element(0) - baseline;
  }
  runs_[layer] = runId;
  Q_EMIT effectsChanged(
      effects_,
      tr("Change in P(target) when one head is zeroed (baseline %1).").arg(baseline, 0, 'f', 4));
  return true;
}

std::optional<int64_t> SweepController::runOf(int64_t layer) const {
  auto it = runs_.find(layer);
  if (it == runs_.end()) return std::nullopt;
  return it->second;
}

}  // namespace shardscope::ui
