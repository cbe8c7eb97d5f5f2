#include "screenshot_tour.h"

#include <QDir>
#include <QPushButton>
#include <QTabWidget>
#include <QTimer>
#include <QTreeView>

#include "engine_controller.h"
#include "expert_routing.h"
#include "main_window.h"
#include "routing_view.h"

namespace shardscope::ui {

ScreenshotTour::ScreenshotTour(MainWindow& window, QString outDir)
    : window_(window), outDir_(std::move(outDir)) {
  QDir().mkpath(outDir_);
  connect(window_.controller(), &EngineController::busyChanged, this, [this](bool busy) {
    if (busy) return;
    if (startPending_) {  // the model has loaded (or failed to)
      startPending_ = false;
      QTimer::singleShot(0, this, &ScreenshotTour::begin);
      return;
    }
    if (waiting_) QTimer::singleShot(300, this, &ScreenshotTour::capture);
  });
}

// The dense tour, or on an MoE model the routing view and an expert's ablation from it.
void ScreenshotTour::planSteps() {
  if (!sparseLayers(window_.controller()->model()).empty()) {
    steps_ = {
        {"09-routing", [this] { window_.routingView()->routeButton()->click(); }},
        {"10-expert-ablation",
         [this] {
           const ExpertRouting routing = window_.routingView()->routing();
           window_.runExpertAblation(routing.layers.front(), routing.expert(0, 0, 0));
         }},
    };
    return;
  }
  const std::string o = "model.model.layers[1].self_attn.o_proj";
  steps_ = {
      {"01-module-tree",
       [this] {
         window_.moduleTree()->expandToDepth(3);
         capture();
       }},
      {"02-read-port",
       [this, o] {
         window_.selectPort(o, "input");
         window_.readSelectedPort();
       }},
      {"03-zero-heads",
       [this] {
         window_.toggleHead(1, 2);
         window_.toggleHead(1, 5);
         window_.runAblation();
       }},
      {"04-sweep",
       [this] {
         window_.runSweep({0, 1});
       }},
      {"05-logit-lens", [this] { window_.runLogitLens(); }},
      {"06-top-k", [this] { window_.runTopK(); }},
      {"07-attention", [this] { window_.runAttentionPattern(1, 3); }},
      {"08-replay", [this] { window_.replayRun(2); }},
  };
}

void ScreenshotTour::start() {
  if (window_.controller()->busy()) {  // the model is still loading
    startPending_ = true;
    return;
  }
  begin();
}

void ScreenshotTour::begin() {
  if (!window_.controller()->hasModel()) {
    ++failures_;
    Q_EMIT finished(failures_);
    return;
  }
  planSteps();
  next();
}

void ScreenshotTour::next() {
  if (current_ >= steps_.size()) {
    Q_EMIT finished(failures_);
    return;
  }
  waiting_ = true;
  steps_[current_].action();
}

void ScreenshotTour::capture() {
  if (!waiting_) return;
  waiting_ = false;
  // A step whose first click only prepared work (the sweep's target lookup) is still running.
  if (window_.controller()->busy()) {
    waiting_ = true;
    return;
  }
  const QString path = outDir_ + "/" + steps_[current_].name + ".png";
  if (!window_.grab().save(path)) ++failures_;
  ++current_;
  QTimer::singleShot(0, this, &ScreenshotTour::next);
}

}  // namespace shardscope::ui
