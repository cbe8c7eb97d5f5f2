// HeadGridView: a layers x heads grid of attention heads. Colour is an effect per head (an
// ablation sweep's change in the target token's probability); ablated heads carry a cross.
// Clicking a cell emits cellClicked(layer, head): the window toggles ablation or opens a run.
#pragma once

#include <QWidget>

#include "result_math.h"
#include "script_builder.h"

class QCustomPlot;
class QCPColorMap;
class QLabel;

namespace shardscope::ui {

class HeadGridView : public QWidget {
  Q_OBJECT
 public:
  explicit HeadGridView(const QString& hint, QWidget* parent = nullptr);

  void setShape(int64_t layers, int64_t heads);
  // [layers, heads] effects; rows without data stay blank (NaN).
  void setEffects(const Matrix& effects, const QString& label);
  void setAblated(const HeadSet& heads);
  const Matrix& effects() const { return effects_; }
  int64_t layers() const { return layers_; }
  int64_t heads() const { return heads_; }
  QCustomPlot* plot() const { return plot_; }
  QWidget* canvas() const;  // the plot as a widget (clicks land here)
  // The pixel centre of a cell, for tests and the screenshot tour.
  QPoint cellCentre(int64_t layer, int64_t head) const;

 Q_SIGNALS:
  void cellClicked(qint64 layer, qint64 head);

 private:
  void redraw();

  QCustomPlot* plot_;
  QCPColorMap* map_;
  QLabel* label_;
  Matrix effects_;
  HeadSet ablated_;
  int64_t layers_ = 0, heads_ = 0;
};

}  // namespace shardscope::ui
