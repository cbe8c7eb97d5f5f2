#include "head_grid_view.h"

#include <qcustomplot.h>
#include <QLabel>
#include <QVBoxLayout>
#include <cmath>
#include <limits>

#include "colour_scales.h"
#include "plot_widget.h"
#include "readout_label.h"

namespace shardscope::ui {

HeadGridView::HeadGridView(const QString& hint, QWidget* parent)
    : QWidget(parent), plot_(new PlotWidget(this)), label_(new QLabel(hint, this)) {
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(plot_, 1);
  layout->addWidget(label_);
  keepLabelFromWidening(label_);
  map_ = new QCPColorMap(plot_->xAxis, plot_->yAxis);
  auto* scale = new QCPColorScale(plot_);
  plot_->plotLayout()->addElement(0, 1, scale);
  map_->setColorScale(scale);
  map_->setGradient(divergingScale());
  map_->setInterpolate(false);
  plot_->xAxis->setLabel(tr("head"));
  plot_->yAxis->setLabel(tr("layer"));
  plot_->yAxis->setRangeReversed(true);
  plot_->addGraph();
  plot_->graph(0)->setLineStyle(QCPGraph::lsNone);
  plot_->graph(0)->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCross, Qt::black, 14));
  connect(plot_, &QCustomPlot::mousePress, this, [this](QMouseEvent* e) {
    const auto layer = int64_t(std::lround(plot_->yAxis->pixelToCoord(e->pos().y())));
    const auto head = int64_t(std::lround(plot_->xAxis->pixelToCoord(e->pos().x())));
    if (layer >= 0 && layer < layers_ && head >= 0 && head < heads_)
      Q_EMIT cellClicked(layer, head);
  });
}

void HeadGridView::setShape(int64_t layers, int64_t heads) {
  layers_ = layers;
  heads_ = heads;
  effects_ =
      Matrix{layers, heads,
             std::vector<double>(size_t(layers * heads), std::numeric_limits<double>::quiet_NaN())};
  ablated_.clear();
  redraw();
}

void HeadGridView::setEffects(const Matrix& effects, const QString& label) {
  effects_ = effects;
  label_->setText(label);
  redraw();
}

void HeadGridView::setAblated(const HeadSet& heads) {
  ablated_ = heads;
  redraw();
}

QWidget* HeadGridView::canvas() const {
  return plot_;
}

QPoint HeadGridView::cellCentre(int64_t layer, int64_t head) const {
  return QPoint(int(plot_->xAxis->coordToPixel(double(head))),
                int(plot_->yAxis->coordToPixel(double(layer))));
}

void HeadGridView::redraw() {
  map_->data()->setSize(int(heads_), int(layers_));
  map_->data()->setRange(QCPRange(0, double(std::max<int64_t>(heads_ - 1, 0))),
                         QCPRange(0, double(std::max<int64_t>(layers_ - 1, 0))));
  double bound = 0;
  for (int64_t l = 0; l < effects_.rows; ++l) {
    for (int64_t h = 0; h < effects_.cols; ++h) {
      const double v = effects_.at(l, h);
      map_->data()->setCell(int(h), int(l), v);
      if (std::isfinite(v)) bound = std::max(bound, std::abs(v));
    }
  }
  map_->setDataRange(QCPRange(-std::max(bound, 1e-9), std::max(bound, 1e-9)));
  QVector<double> xs, ys;
  for (const auto& [layer, heads] : ablated_) {
    for (int64_t h : heads) {
      xs.push_back(double(h));
      ys.push_back(double(layer));
    }
  }
  plot_->graph(0)->setData(xs, ys);
  plot_->xAxis->setRange(-0.5, double(heads_) - 0.5);
  plot_->yAxis->setRange(-0.5, double(layers_) - 0.5);
  plot_->replot();
}

}  // namespace shardscope::ui
