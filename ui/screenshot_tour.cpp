#include "screenshot_tour.h"

#include <QDir>
#include <QTabWidget>
#include <QTimer>
#include <QTreeView>

#include "engine_controller.h"
#include "main_window.h"

namespace shardscope::ui {

ScreenshotTour::ScreenshotTour(MainWindow& window, QString outDir)
    : window_(window), outDir_(std::move(outDir)) {
  QDir().mkpath(outDir_);
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
  connect(window_.controller(), &EngineController::busyChanged, this, [this](bool busy) {
    if (!busy && waiting_) QTimer::singleShot(300, this, &ScreenshotTour::capture);
  });
}

void ScreenshotTour::start() {
  if (window_.controller()->busy()) {  // the model is still loading
    waiting_ = true;
    current_ = 0;
    return;
  }
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
  if (current_ == 0 && !window_.controller()->hasModel()) {
    ++failures_;
    Q_EMIT finished(failures_);
    return;
  }
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
