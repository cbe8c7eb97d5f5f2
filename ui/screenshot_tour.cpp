#include "screenshot_tour.h"

#include <QDir>
#include <QPushButton>
#include <QTabWidget>
#include <QTimer>
#include <QTreeView>
#include <algorithm>

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
           // The chart's other view, so the guide shows both: the first layer's expert load.
           window_.routingView()->setChart(RoutingView::Chart::LayerLoad);
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
      {"07-attention", [this] { showInductionHead(); }},
      {"08-replay", [this] { window_.replayRun(2); }},
  };
}

// The demo model's induction head (tests/core/model/tst_demo_model.cpp finds it): on a sentence
// said twice, layer 3 head 7 attends from each token of the second copy to the token after its
// first occurrence, a diagonal stripe below the main one. Other models: the last layer's last head.
void ScreenshotTour::showInductionHead() {
  const ModelInfo& m = window_.controller()->model();
  window_.setPrompts(
      {"Ever get the feeling that the world is on tape and one of the reels is "
       "missing? Ever get the feeling that the world is on tape and one of the "
       "reels is missing?"});
  window_.runAttentionPattern(std::min<int64_t>(3, m.numLayers - 1),
                              std::min<int64_t>(7, m.numHeads - 1));
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
