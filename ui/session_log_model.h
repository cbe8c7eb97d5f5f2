// SessionLogModel: the runs of the open session file as a table (time, title, model, status, and
// the wall time and generation steps of the run's traces).
#pragma once

#include <QAbstractTableModel>
#include <QString>
#include <optional>
#include <vector>

#include "core/store/session_store.h"

namespace shardscope::ui {

// "41.3 ms, 3 steps" (ms below a second, s above); "-" when not recorded (older session files).
QString traceTimeText(std::optional<double> seconds, int64_t steps);
// The same for a run's result: its traces' wall times and steps summed.
QString traceTimeText(const trace::RunResult& result);

class SessionLogModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column {
    IdColumn,
    TimeColumn,
    TitleColumn,
    ModelColumn,
    StatusColumn,
    TraceTimeColumn,
    ColumnCount
  };
  using QAbstractTableModel::QAbstractTableModel;

  void setRuns(std::vector<store::RunSummary> runs);
  const store::RunSummary* runAt(int row) const;
  int rowOfRun(int64_t id) const;

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation o, int role = Qt::DisplayRole) const override;

 private:
  std::vector<store::RunSummary> runs_;
};

}  // namespace shardscope::ui
