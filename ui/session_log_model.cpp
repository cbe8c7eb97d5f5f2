#include "session_log_model.h"

#include <QBrush>
#include <QColor>
#include <QDateTime>

namespace shardscope::ui {

QString traceTimeText(std::optional<double> seconds, int64_t steps) {
  if (!seconds) return QStringLiteral("-");
  const QString time = *seconds < 1.0 ? QString("%1 ms").arg(*seconds * 1000.0, 0, 'f', 1)
                                      : QString("%1 s").arg(*seconds, 0, 'f', 2);
  return QString("%1, %2 %3").arg(time).arg(steps).arg(steps == 1 ? "step" : "steps");
}

QString traceTimeText(const trace::RunResult& result) {
  std::optional<double> seconds;
  int64_t steps = 0;
  for (const auto& t : result.traces) {
    if (!t.timing) continue;
    seconds = seconds.value_or(0.0) + t.timing->wallSeconds;
    steps += t.timing->steps;
  }
  return traceTimeText(seconds, steps);
}

void SessionLogModel::setRuns(std::vector<store::RunSummary> runs) {
  beginResetModel();
  runs_ = std::move(runs);
  endResetModel();
}

const store::RunSummary* SessionLogModel::runAt(int row) const {
  return row >= 0 && row < int(runs_.size()) ? &runs_[size_t(row)] : nullptr;
}

int SessionLogModel::rowOfRun(int64_t id) const {
  for (size_t i = 0; i < runs_.size(); ++i) {
    if (runs_[i].id == id) return int(i);
  }
  return -1;
}

int SessionLogModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : int(runs_.size());
}

int SessionLogModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : ColumnCount;
}

QVariant SessionLogModel::data(const QModelIndex& index, int role) const {
  const store::RunSummary* r = index.isValid() ? runAt(index.row()) : nullptr;
  if (!r) return {};
  if (role == Qt::ToolTipRole)
    return QString::fromStdString(r->error.empty() ? r->title : r->error);
  if (role == Qt::ForegroundRole && index.column() == StatusColumn) {
    if (r->status == store::RunStatus::Failed) return QBrush(QColor(0xc6, 0x28, 0x28));
    if (r->status == store::RunStatus::Interrupted) return QBrush(QColor(0xef, 0x6c, 0x00));
    return {};
  }
  if (role != Qt::DisplayRole) return {};
  switch (index.column()) {
    case IdColumn:
      return qlonglong(r->id);
    case TimeColumn:
      return QDateTime::fromMSecsSinceEpoch(r->startedMs).toString("yyyy-MM-dd hh:mm:ss");
    case TitleColumn:
      return QString::fromStdString(r->title);
    case ModelColumn:
      return r->model.empty()
                 ? QString()
                 : QString("%1 tp=%2").arg(QString::fromStdString(r->model)).arg(r->tp);
    case StatusColumn:
      return QString::fromLatin1(store::runStatusName(r->status));
    case TraceTimeColumn:
      return traceTimeText(r->traceSeconds, r->steps);
    default:
      return {};
  }
}

QVariant SessionLogModel::headerData(int section, Qt::Orientation o, int role) const {
  if (o != Qt::Horizontal || role != Qt::DisplayRole) return {};
  static const char* names[] = {"Run", "Started", "What", "Model", "Status", "Trace time"};
  return section >= 0 && section < ColumnCount ? tr(names[section]) : QVariant();
}

}  // namespace shardscope::ui
