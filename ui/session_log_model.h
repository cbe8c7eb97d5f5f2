// SessionLogModel: the runs of the open session file as a table (time, title, model, status).
#pragma once

#include <QAbstractTableModel>
#include <vector>

#include "core/store/session_store.h"

namespace shardscope::ui {

class SessionLogModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column { IdColumn, TimeColumn, TitleColumn, ModelColumn, StatusColumn, ColumnCount };
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
