#include "logit_lens_view.h"

#include <qcustomplot.h>
#include <QVBoxLayout>

#include "colour_scales.h"
#include "plot_widget.h"

namespace shardscope::ui {

LogitLensView::LogitLensView(QWidget* parent) : QWidget(parent), plot_(new PlotWidget(this)) {
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(plot_);
  map_ = new QCPColorMap(plot_->xAxis, plot_->yAxis);
  auto* scale = new QCPColorScale(plot_);
  plot_->plotLayout()->addElement(0, 1, scale);
  scale->axis()->setLabel(tr("top-token probability"));
  map_->setColorScale(scale);
  map_->setGradient(sequentialScale());
  map_->setInterpolate(false);
  map_->setDataRange(QCPRange(0, 1));
  plot_->xAxis->setLabel(tr("position"));
  plot_->yAxis->setLabel(tr("layer"));
}

void LogitLensView::setLens(const Matrix& p, const std::vector<std::vector<QString>>& tokens,
                            const QStringList& positions) {
  probabilities_ = p;
  plot_->clearItems();
  map_->data()->setSize(int(p.cols), int(p.rows));
  map_->data()->setRange(QCPRange(0, double(std::max<int64_t>(p.cols - 1, 0))),
                         QCPRange(0, double(std::max<int64_t>(p.rows - 1, 0))));
  const bool labels = p.rows * p.cols <= 600;  // beyond that the text would not fit
  for (int64_t l = 0; l < p.rows; ++l) {
    for (int64_t t = 0; t < p.cols; ++t) {
      map_->data()->setCell(int(t), int(l), p.at(l, t));
      if (!labels) continue;
      auto* text = new QCPItemText(plot_);
      text->position->setCoords(double(t), double(l));
      text->setText(QString("%1\n%2").arg(tokens[size_t(l)][size_t(t)]).arg(p.at(l, t), 0, 'f', 2));
      text->setColor(p.at(l, t) < 0.5 ? Qt::white : Qt::black);
    }
  }
  QSharedPointer<QCPAxisTickerText> ticker(new QCPAxisTickerText);
  for (int i = 0; i < positions.size(); ++i) ticker->addTick(i, positions[i]);
  plot_->xAxis->setTicker(ticker);
  plot_->xAxis->setRange(-0.5, double(p.cols) - 0.5);
  plot_->yAxis->setRange(-0.5, double(p.rows) - 0.5);
  plot_->replot();
}

}  // namespace shardscope::ui
