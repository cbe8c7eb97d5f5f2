#include "expert_chart.h"

#include <qcustomplot.h>

#include <algorithm>
#include <vector>

namespace shardscope::ui {

ExpertChart::ExpertChart(QWidget* parent)
    : PlotWidget(parent),
      chosen_(new QCPBars(xAxis, yAxis)),
      others_(new QCPBars(xAxis, yAxis)),
      title_(new QCPTextElement(this, QString())),
      probabilities_(new QCPAxisTicker) {
  chosen_->setBrush(QColor(31, 119, 180));
  chosen_->setPen(Qt::NoPen);
  others_->setBrush(QColor(175, 175, 175));
  others_->setPen(Qt::NoPen);
  others_->setName(tr("not chosen"));
  xAxis->setLabel(tr("expert"));
  plotLayout()->insertRow(0);
  plotLayout()->addElement(0, 0, title_);
  // Expert ids and token counts are whole numbers: ticks on multiples of 1 (of 2, 5, 10, ...
  // when they crowd). Probabilities get three ticks: the chart is short.
  xAxis->setTicker(wholeNumbers());
  counts_ = wholeNumbers();
  counts_->setTickCount(3);
  probabilities_->setTickStepStrategy(QCPAxisTicker::tssMeetTickCount);
  probabilities_->setTickCount(3);
  yAxis->setTicker(probabilities_);
}

QSharedPointer<QCPAxisTickerFixed> ExpertChart::wholeNumbers() {
  QSharedPointer<QCPAxisTickerFixed> ticker(new QCPAxisTickerFixed);
  ticker->setTickStep(1);
  ticker->setScaleStrategy(QCPAxisTickerFixed::ssMultiples);
  return ticker;
}

void ExpertChart::showProbabilities(const ExpertRouting& routing, size_t row, int64_t token,
                                    const QString& tokenText) {
  std::vector<bool> isChosen(size_t(routing.numExperts), false);
  for (int64_t k = 0; k < routing.topK; ++k) isChosen[size_t(routing.expert(row, token, k))] = true;
  QVector<double> chosenKeys, chosenValues, otherKeys, otherValues;
  double top = 0;
  for (int64_t e = 0; e < routing.numExperts; ++e) {
    const double p = routing.probability(row, token, e);
    top = std::max(top, p);
    (isChosen[size_t(e)] ? chosenKeys : otherKeys).push_back(double(e));
    (isChosen[size_t(e)] ? chosenValues : otherValues).push_back(p);
  }
  chosen_->setName(tr("chosen"));
  chosen_->setData(chosenKeys, chosenValues, true);
  yAxis->setTicker(probabilities_);
  others_->setData(otherKeys, otherValues, true);
  // One arg() call for all four: a token's text may itself hold "%3".
  finish(tr("Router probabilities at layer %1, token '%2' (chosen in blue): the %3 chosen hold %4")
             .arg(QString::number(routing.layers[row]), tokenText, QString::number(routing.topK),
                  QString::number(routing.chosenMass(row, token), 'f', 2)),
         tr("router probability"), routing.numExperts, top);
}

void ExpertChart::showLoad(const ExpertRouting& routing, size_t row, int64_t numExperts) {
  const std::vector<int64_t> load = routing.load(row, numExperts);
  QVector<double> keys, values;
  int64_t idle = 0, busiest = 0;
  for (int64_t e = 0; e < numExperts; ++e) {
    keys.push_back(double(e));
    values.push_back(double(load[size_t(e)]));
    idle += load[size_t(e)] == 0;
    busiest = std::max(busiest, load[size_t(e)]);
  }
  chosen_->setName(tr("tokens"));
  chosen_->setData(keys, values, true);
  others_->data()->clear();
  yAxis->setTicker(counts_);
  finish(tr("Layer %1: tokens choosing each expert (%2 tokens x %3); %4 of %5 chosen by none, the "
            "busiest by %6")
             .arg(QString::number(routing.layers[row]), QString::number(routing.tokens),
                  QString::number(routing.topK), QString::number(idle), QString::number(numExperts),
                  QString::number(busiest)),
         tr("tokens"), numExperts, double(busiest));
}

void ExpertChart::showNothing(const QString& why) {
  chosen_->data()->clear();
  others_->data()->clear();
  yAxis->setTicker(probabilities_);
  finish(why, QString(), 8, 0);
}

QString ExpertChart::title() const {
  return title_->text();
}

void ExpertChart::finish(const QString& title, const QString& valueLabel, int64_t experts,
                         double top) {
  title_->setText(title);
  yAxis->setLabel(valueLabel);
  xAxis->setRange(-0.5, double(experts) - 0.5);
  yAxis->setRange(0, top > 0 ? top * 1.15 : 1);
  replot();
}

}  // namespace shardscope::ui
