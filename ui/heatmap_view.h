// HeatmapView: a matrix (tokens x features, tokens x heads, or an attention pattern) as a colour
// map with a colour scale and a hover readout, above a line plot of each row's L2 norm.
#pragma once

#include <QLabel>
#include <QWidget>
#include <vector>

#include "result_math.h"

class QCustomPlot;
class QCPColorMap;
class QCPColorScale;

namespace shardscope::ui {

class HeatmapView : public QWidget {
  Q_OBJECT
 public:
  explicit HeatmapView(QWidget* parent = nullptr);

  // `rowLabels` name the rows (tokens); `columnName` names the x axis ("feature", "head", ...).
  void setMatrix(const QString& title, const Matrix& m, const QStringList& rowLabels,
                 const QString& columnName, bool showRowNorms = true);
  void clear();

  const Matrix& matrix() const { return matrix_; }
  QString title() const { return title_; }
  QCustomPlot* plot() const { return plot_; }
  // The readout text for the cell under plot coordinates (x = column, y = row).
  QString readoutAt(double x, double y) const;
  // Comma-separated values, one line per row (for Export).
  QString toCsv() const;

 private:
  void onMouseMove(QMouseEvent* event);

  QCustomPlot* plot_;
  QCustomPlot* normPlot_;
  QCPColorMap* map_;
  QCPColorScale* scale_;
  QLabel* readout_;
  Matrix matrix_;
  QStringList rowLabels_;
  QString title_, columnName_;
};

}  // namespace shardscope::ui
