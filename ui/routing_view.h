// RoutingView: the experts each token chose in each MoE layer (tokens x sparse layers). A cell's
// colour is the expert with the highest router weight; hovering reads out every chosen expert with
// its weight, and the chart below shows, as its selector says, that cell's router probability for
// every expert or its layer's load. Clicking a cell emits expertClicked(layer, expert) for that
// cell's top expert: the window ablates it (its router logit set to -inf) in a recorded run.
// "Route prompt" asks the window for a routing run of the first prompt.
#pragma once

#include <QStringList>
#include <QWidget>

#include "expert_routing.h"

class QCustomPlot;
class QCPColorMap;
class QComboBox;
class QLabel;
class QPushButton;

namespace shardscope::ui {

class ExpertChart;

class RoutingView : public QWidget {
  Q_OBJECT
 public:
  explicit RoutingView(QWidget* parent = nullptr);

  // `numExperts` fixes the colours (expert e has the same colour in every run of a model).
  void setRouting(const ExpertRouting& routing, const QStringList& tokenLabels, int64_t numExperts);
  void clear(const QString& hint);
  const ExpertRouting& routing() const { return routing_; }
  // What hovering over (row, token) shows: "layer 3, token ' Paris': expert 5 (0.62), 1 (0.38)".
  QString readOut(size_t row, int64_t token) const;
  QString hint() const;
  QWidget* canvas() const;  // the plot as a widget (clicks land here)
  QCustomPlot* plot() const { return plot_; }
  QPoint cellCentre(size_t row, int64_t token) const;  // for tests and the screenshot tour
  QPushButton* routeButton() const { return route_; }

  // What the chart below the grid shows for the cell hovered last.
  enum class Chart { CellProbabilities, LayerLoad };
  void setChart(Chart chart);
  Chart chartKind() const;
  // The chart for (row, token) (hovering a cell does this; the chart keeps the last cell hovered
  // when the cursor leaves the grid). A routing without probabilities gives an empty probability
  // chart whose title says why; its load still shows.
  void showCell(size_t row, int64_t token);
  ExpertChart* chart() const { return chart_; }
  QComboBox* chartSelector() const { return chartKind_; }

 Q_SIGNALS:
  void routeRequested();
  void expertClicked(qint64 layer, qint64 expert);

 private:
  // The (row, token) under a pixel, or false.
  bool cellAt(const QPoint& pixel, size_t& row, int64_t& token) const;

  QCustomPlot* plot_;
  QCPColorMap* map_;
  ExpertChart* chart_;
  QComboBox* chartKind_;
  size_t shownRow_ = 0;  // the cell the chart shows
  int64_t shownToken_ = 0;
  int64_t numExperts_ = 0;
  QLabel* label_;
  QPushButton* route_;
  ExpertRouting routing_;
  QStringList tokens_;
};

}  // namespace shardscope::ui
