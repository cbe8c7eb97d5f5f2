// RunComparisonView: two recorded runs side by side, as `shardscope-cli diff` reports them: a
// table of every saved value (max abs and relative difference of run B against run A), the
// difference B - A of the selected value as a heatmap, and the generations with changed tokens.
#pragma once

#include <QWidget>
#include <memory>

#include "core/store/replay.h"
#include "core/store/session_store.h"

class QLabel;
class QTableWidget;

namespace shardscope {
class Tokenizer;
}

namespace shardscope::ui {

class HeatmapView;
class OutputDiffView;

class RunComparisonView : public QWidget {
  Q_OBJECT
 public:
  enum Column { TraceColumn, NameColumn, MaxAbsColumn, RelativeColumn, DetailColumn, ColumnCount };

  explicit RunComparisonView(QWidget* parent = nullptr);

  // `a` and `b` with their value data; `report` is store::compareRuns of the two.
  void setComparison(store::RunRecord a, store::RunRecord b, store::ReplayReport report,
                     const std::shared_ptr<const Tokenizer>& tokenizer);
  // Draws the difference of the report's value `row` (the table's row).
  void selectValue(int row);

  const store::ReplayReport& report() const { return report_; }
  QTableWidget* table() const { return table_; }
  HeatmapView* heatmap() const { return heatmap_; }
  OutputDiffView* generations() const { return generations_; }
  QString summary() const;

 private:
  const trace::SavedValue* valueOf(const store::RunRecord& r, int trace,
                                   const std::string& name) const;

  QLabel* summary_;
  QTableWidget* table_;
  HeatmapView* heatmap_;
  OutputDiffView* generations_;
  store::RunRecord a_, b_;
  store::ReplayReport report_;
};

}  // namespace shardscope::ui
