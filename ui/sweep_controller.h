// SweepController: the ablation sweep. Each chosen layer becomes one script that zeroes each head
// of the layer alone and saves the target token's probability (ScriptBuilder::sweepLayer); each
// layer's run becomes that layer's row of effects (change from the baseline), and the controller
// remembers which run drew which layer. Without a target token it first asks for a Top-k run and
// sweeps for that run's greedy token when its batch ends. It builds scripts and reads results;
// running the scripts and drawing the effects are the window's, through the signals.
#pragma once

#include <QObject>
#include <QString>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "engine_controller.h"
#include "result_math.h"
#include "script_builder.h"

namespace shardscope::ui {

class SweepController : public QObject {
  Q_OBJECT
 public:
  explicit SweepController(QObject* parent = nullptr);

  // The layers the Sweep layers box names ("0-3", "1,5"; empty: all), those below `numLayers`.
  static std::vector<int64_t> parseLayers(const QString& text, int64_t numLayers);
  // Whether `r` is a sweep layer's run (what sweepLayer saves).
  static bool isLayerRun(const trace::RunResult& r);

  // The model sweeps run on; forgets the effects and runs of an earlier model.
  void setModel(const ModelInfo& model);
  // Sweeps `layers` for token `target` (emits started). Without a target, emits targetNeeded and
  // sweeps with these settings once a Top-k run found the greedy token; if the lookup's batch
  // ends without one, the sweep is dropped.
  void start(const std::vector<int64_t>& layers, std::optional<int64_t> target,
             const GenerationSettings& settings);
  // Forgets a sweep that waits for its target (Stop).
  void cancel();
  // The engine's results (connected to EngineController's signals of the same names).
  void onRunFinished(const std::shared_ptr<const RunOutcome>& outcome);
  void onBatchFinished(bool cancelled);
  // Takes a sweep layer's run (live, or opened from the session log) into the effects and emits
  // effectsChanged; false (and nothing changes) if the run was not made as a sweep of one of the
  // model's layers (`view`).
  bool addLayerRun(int64_t runId, const store::RunView& view, const trace::RunResult& r);

  // [layers, heads] changes in the target's probability; layers not swept are NaN.
  const Matrix& effects() const { return effects_; }
  // The run that drew `layer`, if any.
  std::optional<int64_t> runOf(int64_t layer) const;
  bool waitingForTarget() const { return !pending_.empty(); }

 Q_SIGNALS:
  // Run a Top-k script (titled "Top-k"): its greedy token becomes the sweep's target.
  void targetNeeded();
  void targetFound(qint64 token);
  // A sweep began: the effects are blank and `scripts` (one a layer) are to run as one batch.
  void started(const std::vector<ScriptRequest>& scripts);
  void effectsChanged(const Matrix& effects, const QString& label);

 private:
  Matrix blankEffects() const;

  std::optional<ModelInfo> model_;
  Matrix effects_;
  std::map<int64_t, int64_t> runs_;  // layer -> run id
  // A sweep waiting for its target: its layers, its settings and the token found so far.
  std::vector<int64_t> pending_;
  GenerationSettings pendingSettings_;
  std::optional<int64_t> foundTarget_;
};

}  // namespace shardscope::ui
