// PlotWidget: QCustomPlot that keeps its last non-empty viewport while Qt gives it an empty size
// (a tab page not shown yet, a collapsed splitter, QWidget::grab() flushing hidden children's
// pending resizes). QCustomPlot would replot into a null paint buffer there and warn
// "QPainter::begin: Paint device returned engine == 0" for every layer; there is nothing to draw,
// and it replots when it gets a real size again. Its minimum size is fixed: QCustomPlot's follows
// its tick labels (token texts), so each new run would resize the panels around it.
#pragma once

#include <qcustomplot.h>

namespace shardscope::ui {

class PlotWidget : public QCustomPlot {  // no Q_OBJECT: no signals or slots of its own
 public:
  explicit PlotWidget(QWidget* parent = nullptr) : QCustomPlot(parent) {}
  QSize minimumSizeHint() const override { return {160, 120}; }

 protected:
  void resizeEvent(QResizeEvent* event) override {
    if (event->size().isEmpty()) return;
    QCustomPlot::resizeEvent(event);
  }
};

}  // namespace shardscope::ui
