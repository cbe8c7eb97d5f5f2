#include "heatmap_view.h"

#include <qcustomplot.h>
#include <QVBoxLayout>

#include "colour_scales.h"
#include "plot_widget.h"
#include "readout_label.h"

namespace shardscope::ui {

HeatmapView::HeatmapView(QWidget* parent)
    : QWidget(parent),
      plot_(new PlotWidget(this)),
      normPlot_(new PlotWidget(this)),
      readout_(new QLabel(this)) {
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(plot_, 3);
  layout->addWidget(normPlot_, 1);
  layout->addWidget(readout_);
  keepLabelFromWidening(readout_);
  readout_->setText(tr("Select a port and press Read (or double-click it)."));
  map_ = new QCPColorMap(plot_->xAxis, plot_->yAxis);
  scale_ = new QCPColorScale(plot_);
  plot_->plotLayout()->addElement(0, 1, scale_);
  scale_->setType(QCPAxis::atRight);
  map_->setColorScale(scale_);
  map_->setGradient(divergingScale());
  map_->setInterpolate(false);
  plot_->yAxis->setRangeReversed(true);  // token 0 at the top, as in a table
  plot_->setMouseTracking(true);
  connect(plot_, &QCustomPlot::mouseMove, this, &HeatmapView::onMouseMove);
  normPlot_->addGraph();
  normPlot_->xAxis->setLabel(tr("token"));
  normPlot_->yAxis->setLabel(tr("L2 norm"));
}

void HeatmapView::clear() {
  setMatrix({}, Matrix{}, {}, {});
}

void HeatmapView::setMatrix(const QString& title, const Matrix& m, const QStringList& rowLabels,
                            const QString& columnName, bool showRowNorms) {
  matrix_ = m;
  rowLabels_ = rowLabels;
  title_ = title;
  columnName_ = columnName;
  map_->data()->setSize(int(m.cols), int(m.rows));
  map_->data()->setRange(QCPRange(0, double(std::max<int64_t>(m.cols - 1, 0))),
                         QCPRange(0, double(std::max<int64_t>(m.rows - 1, 0))));
  double lo = 0, hi = 0;
  for (int64_t r = 0; r < m.rows; ++r) {
    for (int64_t c = 0; c < m.cols; ++c) {
      const double v = m.at(r, c);
      map_->data()->setCell(int(c), int(r), v);
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
  }
  // Symmetric scale for signed data (white = 0); plain for non-negative data.
  const double bound = std::max(std::abs(lo), std::abs(hi));
  map_->setGradient(lo < 0 ? divergingScale() : sequentialScale());
  map_->setDataRange(lo < 0 ? QCPRange(-bound, bound) : QCPRange(0, hi > 0 ? hi : 1));
  plot_->xAxis->setLabel(columnName);
  plot_->yAxis->setLabel(tr("token"));
  plot_->xAxis->setRange(-0.5, double(m.cols) - 0.5);
  plot_->yAxis->setRange(-0.5, double(m.rows) - 0.5);
  QSharedPointer<QCPAxisTickerText> ticker(new QCPAxisTickerText);
  for (int i = 0; i < rowLabels.size(); ++i) ticker->addTick(i, rowLabels[i]);
  if (!rowLabels.isEmpty()) plot_->yAxis->setTicker(ticker);
  plot_->replot();
  const std::vector<double> norms = rowNorms(m);
  QVector<double> xs, ys;
  for (size_t i = 0; i < norms.size(); ++i) {
    xs.push_back(double(i));
    ys.push_back(norms[i]);
  }
  normPlot_->graph(0)->setData(xs, ys);
  normPlot_->setVisible(showRowNorms);
  normPlot_->rescaleAxes();
  normPlot_->replot();
  readout_->setText(m.rows ? tr("%1: %2 x %3 (hover for values)").arg(title).arg(m.rows).arg(m.cols)
                           : tr("No value."));
}

QString HeatmapView::readoutAt(double x, double y) const {
  const int64_t c = int64_t(std::lround(x)), r = int64_t(std::lround(y));
  if (r < 0 || c < 0 || r >= matrix_.rows || c >= matrix_.cols) return {};
  const QString token = r < rowLabels_.size() ? rowLabels_[int(r)] : QString::number(r);
  return tr("token %1 (%2), %3 %4: %5")
      .arg(r)
      .arg(token)
      .arg(columnName_)
      .arg(c)
      .arg(matrix_.at(r, c), 0, 'g', 6);
}

void HeatmapView::onMouseMove(QMouseEvent* event) {
  const double x = plot_->xAxis->pixelToCoord(event->pos().x());
  const double y = plot_->yAxis->pixelToCoord(event->pos().y());
  const QString text = readoutAt(x, y);
  if (!text.isEmpty()) readout_->setText(text);
}

QString HeatmapView::toCsv() const {
  QString out;
  for (int64_t r = 0; r < matrix_.rows; ++r) {
    QStringList cells;
    if (r < rowLabels_.size())
      cells << "\"" + QString(rowLabels_[int(r)]).replace("\"", "\"\"") + "\"";
    for (int64_t c = 0; c < matrix_.cols; ++c) cells << QString::number(matrix_.at(r, c), 'g', 9);
    out += cells.join(',') + "\n";
  }
  return out;
}

}  // namespace shardscope::ui
