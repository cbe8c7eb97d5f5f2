// LogitLensView: layers x positions; each cell is coloured by the probability of the top token
// that layer's residual stream predicts at that position, and labelled with the token.
#pragma once

#include <QWidget>

#include "result_math.h"

class QCustomPlot;
class QCPColorMap;

namespace shardscope::ui {

class LogitLensView : public QWidget {
  Q_OBJECT
 public:
  explicit LogitLensView(QWidget* parent = nullptr);
  // probabilities and tokens are [layers, positions]; `positions` labels the columns.
  void setLens(const Matrix& probabilities, const std::vector<std::vector<QString>>& tokens,
               const QStringList& positions);
  const Matrix& probabilities() const { return probabilities_; }
  QCustomPlot* plot() const { return plot_; }

 private:
  QCustomPlot* plot_;
  QCPColorMap* map_;
  Matrix probabilities_;
};

}  // namespace shardscope::ui
