#include "routing_view.h"

#include <qcustomplot.h>
#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>

#include "expert_chart.h"
#include "plot_widget.h"
#include "readout_label.h"

namespace shardscope::ui {

RoutingView::RoutingView(QWidget* parent)
    : QWidget(parent),
      plot_(new PlotWidget(this)),
      chart_(new ExpertChart(this)),
      chartKind_(new QComboBox(this)),
      label_(new QLabel(this)),
      route_(new QPushButton(tr("Route prompt"), this)) {
  auto* layout = new QVBoxLayout(this);
  auto* bar = new QHBoxLayout;
  bar->addWidget(route_);
  bar->addWidget(label_, 1);
  chartKind_->addItem(tr("Cell: router probabilities"));
  chartKind_->addItem(tr("Layer: expert load"));
  chartKind_->setToolTip(tr("What the chart under the grid shows for the cell hovered last"));
  bar->addWidget(chartKind_);
  keepLabelFromWidening(label_);
  layout->addLayout(bar);
  layout->addWidget(plot_, 3);
  layout->addWidget(chart_, 2);
  map_ = new QCPColorMap(plot_->xAxis, plot_->yAxis);
  auto* scale = new QCPColorScale(plot_);
  scale->axis()->setLabel(tr("top expert"));
  plot_->plotLayout()->addElement(0, 1, scale);
  map_->setColorScale(scale);
  QCPColorGradient hues(QCPColorGradient::gpHues);  // categorical: one hue per expert
  hues.setLevelCount(2);
  hues.setNanHandling(QCPColorGradient::nhTransparent);
  map_->setGradient(hues);
  map_->setInterpolate(false);
  plot_->xAxis->setLabel(tr("token"));
  plot_->yAxis->setLabel(tr("layer"));
  plot_->yAxis->setRangeReversed(true);
  plot_->setMouseTracking(true);
  connect(chartKind_, &QComboBox::currentIndexChanged, this,
          [this] { showCell(shownRow_, shownToken_); });
  connect(route_, &QPushButton::clicked, this, &RoutingView::routeRequested);
  connect(plot_, &QCustomPlot::mouseMove, this, [this](QMouseEvent* e) {
    size_t row;
    int64_t token;
    if (!cellAt(e->pos(), row, token)) {
      label_->setText(hint());
      return;
    }
    label_->setText(readOut(row, token));
    if (row != shownRow_ || token != shownToken_) showCell(row, token);
  });
  connect(plot_, &QCustomPlot::mousePress, this, [this](QMouseEvent* e) {
    size_t row;
    int64_t token;
    if (cellAt(e->pos(), row, token))
      Q_EMIT expertClicked(routing_.layers[row], routing_.expert(row, token, 0));
  });
  clear(tr("Route the first prompt to see which experts each token chooses (MoE models)."));
}

void RoutingView::clear(const QString& hint) {
  routing_ = ExpertRouting{};
  tokens_.clear();
  numExperts_ = 0;
  map_->data()->clear();
  label_->setText(hint);
  plot_->replot();
  showCell(0, 0);
}

QString RoutingView::hint() const {
  return tr("Hover a cell for the experts a token chose; click it to ablate its top expert.");
}

void RoutingView::setRouting(const ExpertRouting& routing, const QStringList& tokenLabels,
                             int64_t numExperts) {
  routing_ = routing;
  tokens_ = tokenLabels;
  numExperts_ = std::max({numExperts, routing.numExperts, maxExpert(routing) + 1});
  const int rows = int(routing.layers.size()), cols = int(routing.tokens);
  QCPColorGradient hues = map_->gradient();
  hues.setLevelCount(int(std::max<int64_t>(numExperts, 2)));
  map_->setGradient(hues);
  map_->data()->setSize(cols, rows);
  map_->data()->setRange(QCPRange(0, std::max(cols - 1, 0)), QCPRange(0, std::max(rows - 1, 0)));
  for (int r = 0; r < rows; ++r) {
    for (int t = 0; t < cols; ++t)
      map_->data()->setCell(t, r, double(routing.expert(size_t(r), t, 0)));
  }
  map_->setDataRange(QCPRange(0, double(std::max<int64_t>(numExperts - 1, 1))));
  QSharedPointer<QCPAxisTickerText> layerTicks(new QCPAxisTickerText);
  for (int r = 0; r < rows; ++r) layerTicks->addTick(r, QString::number(routing.layers[size_t(r)]));
  plot_->yAxis->setTicker(layerTicks);
  QSharedPointer<QCPAxisTickerText> tokenTicks(new QCPAxisTickerText);
  for (int t = 0; t < cols && t < tokenLabels.size(); ++t) tokenTicks->addTick(t, tokenLabels[t]);
  plot_->xAxis->setTicker(tokenTicks);
  plot_->xAxis->setTickLabelRotation(tokenLabels.size() > 8 ? 60 : 0);
  plot_->xAxis->setRange(-0.5, cols - 0.5);
  plot_->yAxis->setRange(-0.5, rows - 0.5);
  label_->setText(hint());
  plot_->replot();
  // A new routing of the same layout keeps the cell the chart showed; others start at the first.
  const bool within = shownRow_ < size_t(rows) && shownToken_ < cols;
  showCell(within ? shownRow_ : 0, within ? shownToken_ : 0);
}

void RoutingView::setChart(Chart chart) {
  chartKind_->setCurrentIndex(chart == Chart::LayerLoad ? 1 : 0);
}

RoutingView::Chart RoutingView::chartKind() const {
  return chartKind_->currentIndex() == 1 ? Chart::LayerLoad : Chart::CellProbabilities;
}

void RoutingView::showCell(size_t row, int64_t token) {
  shownRow_ = row;
  shownToken_ = token;
  // Kept in place (not hidden) when there is nothing to show, so the grid does not jump.
  if (row >= routing_.layers.size() || token < 0 || token >= routing_.tokens) {
    chart_->showNothing(
        tr("Hover a cell of the grid for its router probabilities or its "
           "layer's load"));
    return;
  }
  if (chartKind() == Chart::LayerLoad) {
    chart_->showLoad(routing_, row, numExperts_);
    return;
  }
  if (!routing_.hasProbabilities()) {
    chart_->showNothing(
        tr("This run saved no router probabilities: route the prompt again to "
           "see them (the layer's load shows without them)"));
    return;
  }
  const QString text = token < tokens_.size() ? tokens_[int(token)] : QString("#%1").arg(token);
  chart_->showProbabilities(routing_, row, token, text);
}

QString RoutingView::readOut(size_t row, int64_t token) const {
  QStringList chosen;
  for (int64_t k = 0; k < routing_.topK; ++k) {
    chosen << QString("%1 (%2)")
                  .arg(routing_.expert(row, token, k))
                  .arg(routing_.weight(row, token, k), 0, 'f', 2);
  }
  const QString text = token < tokens_.size() ? tokens_[int(token)] : QString("#%1").arg(token);
  return tr("layer %1, token '%2': expert %3")
      .arg(QString::number(routing_.layers[row]), text, chosen.join(", "));
}

QWidget* RoutingView::canvas() const {
  return plot_;
}

QPoint RoutingView::cellCentre(size_t row, int64_t token) const {
  return QPoint(int(plot_->xAxis->coordToPixel(double(token))),
                int(plot_->yAxis->coordToPixel(double(row))));
}

bool RoutingView::cellAt(const QPoint& pixel, size_t& row, int64_t& token) const {
  const auto r = std::lround(plot_->yAxis->pixelToCoord(pixel.y()));
  const auto t = std::lround(plot_->xAxis->pixelToCoord(pixel.x()));
  if (r < 0 || r >= long(routing_.layers.size()) || t < 0 || t >= routing_.tokens) return false;
  row = size_t(r);
  token = t;
  return true;
}

}  // namespace shardscope::ui
