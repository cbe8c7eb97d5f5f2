#include "top_k_view.h"

#include <qcustomplot.h>
#include <QVBoxLayout>

#include "plot_widget.h"

namespace shardscope::ui {

TopKView::TopKView(QWidget* parent) : QWidget(parent), plot_(new PlotWidget(this)) {
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(plot_);
  plot_->yAxis->setLabel(tr("probability"));
}

void TopKView::setTokens(const std::vector<std::pair<QString, double>>& tokens,
                         const QString& title) {
  tokens_ = tokens;
  plot_->clearPlottables();
  auto* bars = new QCPBars(plot_->xAxis, plot_->yAxis);
  QVector<double> xs, ys;
  QSharedPointer<QCPAxisTickerText> ticker(new QCPAxisTickerText);
  for (size_t i = 0; i < tokens.size(); ++i) {
    xs.push_back(double(i));
    ys.push_back(tokens[i].second);
    ticker->addTick(double(i), tokens[i].first);
  }
  bars->setData(xs, ys);
  bars->setName(title);
  plot_->xAxis->setTicker(ticker);
  plot_->xAxis->setTickLabelRotation(45);
  plot_->xAxis->setRange(-0.7, double(tokens.size()) - 0.3);
  plot_->yAxis->setRange(0, ys.isEmpty() ? 1 : *std::max_element(ys.begin(), ys.end()) * 1.1);
  plot_->xAxis->setLabel(title);
  plot_->replot();
}

}  // namespace shardscope::ui
