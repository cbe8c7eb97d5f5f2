// ExpertChart: the routing view's bar chart over one MoE layer's experts. It shows either the
// router probabilities of one token (the softmax of mlp.gate's logits, the chosen experts in
// blue) or the layer's load (how many of the prompt's tokens chose each expert: experts nobody
// chose, and ones that take most tokens, stand out). Plain bars keyed by expert id.
#pragma once

#include <QString>

#include "expert_routing.h"
#include "plot_widget.h"

class QCPAxisTicker;
class QCPAxisTickerFixed;
class QCPBars;
class QCPTextElement;

namespace shardscope::ui {

class ExpertChart : public PlotWidget {
 public:
  explicit ExpertChart(QWidget* parent = nullptr);

  // Token `token` of routing row `row`: every expert's router probability, the chosen highlighted.
  // Needs routing.hasProbabilities().
  void showProbabilities(const ExpertRouting& routing, size_t row, int64_t token,
                         const QString& tokenText);
  // Routing row `row`: the tokens that chose each of `numExperts` experts.
  void showLoad(const ExpertRouting& routing, size_t row, int64_t numExperts);
  // No bars; the title says why.
  void showNothing(const QString& why);

  QString title() const;
  // The bars: chosen (probabilities) or the load, and the experts not chosen (probabilities only).
  const QCPBars* chosenBars() const { return chosen_; }
  const QCPBars* otherBars() const { return others_; }

 private:
  void finish(const QString& title, const QString& valueLabel, int64_t experts, double top);
  static QSharedPointer<QCPAxisTickerFixed> wholeNumbers();

  QCPBars* chosen_;
  QCPBars* others_;
  QCPTextElement* title_;
  QSharedPointer<QCPAxisTicker> probabilities_;  // the value axis's ticks in each view
  QSharedPointer<QCPAxisTickerFixed> counts_;
};

}  // namespace shardscope::ui
