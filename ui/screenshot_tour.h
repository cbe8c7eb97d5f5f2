// ScreenshotTour: drives a MainWindow through its views on the demo model (read a port, zero two
// heads, sweep two layers, logit lens, top-k, the induction head's attention pattern, replay), or
// on an MoE model through the routing view and an expert's ablation, and saves a PNG of the window
// after each, for docs/screenshots. `scripts/screenshots` runs it under Xvfb on both.
#pragma once

#include <QObject>
#include <QString>
#include <functional>
#include <vector>

namespace shardscope::ui {

class MainWindow;

class ScreenshotTour : public QObject {
  Q_OBJECT
 public:
  ScreenshotTour(MainWindow& window, QString outDir);
  void start();

 Q_SIGNALS:
  void finished(int failures);

 private:
  struct Step {
    QString name;  // the PNG's name
    std::function<void()> action;
  };
  void planSteps();
  void showInductionHead();
  void begin();
  void next();
  void capture();

  MainWindow& window_;
  QString outDir_;
  std::vector<Step> steps_;
  size_t current_ = 0;
  int failures_ = 0;
  bool waiting_ = false;
  bool startPending_ = false;
};

}  // namespace shardscope::ui
