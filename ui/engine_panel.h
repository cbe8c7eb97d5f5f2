// EnginePanel: the loaded model and its ranks (device, weight bytes per rank), the running job
// and its progress.
#pragma once

#include <QWidget>

#include "core/engine/engine_types.h"

class QLabel;
class QProgressBar;
class QTreeWidget;

namespace shardscope::ui {

class EnginePanel : public QWidget {
  Q_OBJECT
 public:
  explicit EnginePanel(QWidget* parent = nullptr);
  void setModel(const ModelInfo* model);                          // nullptr: no model loaded
  void setJob(const QString& what, int64_t step, int64_t total);  // empty `what`: idle
  QString jobText() const;
  int rankRows() const;

 private:
  QLabel* model_;
  QTreeWidget* ranks_;
  QLabel* job_;
  QProgressBar* progress_;
};

// Bytes of the parameters one rank holds (its shards), from the module tree.
int64_t weightBytesPerRank(const ModelInfo& model);

}  // namespace shardscope::ui
