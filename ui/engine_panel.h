// EnginePanel: the loaded model (with its CPU threads per rank) and its ranks (device, weight
// bytes per rank), where it runs (this process or an engine server, and "engine lost" once that
// has gone away), the running job and its progress.
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
  // Where the model runs; `lost`: the engine went away (shown in red, with how to reconnect).
  void setEngine(const QString& where, bool lost = false);
  QString modelText() const;
  QString engineText() const;
  QString jobText() const;
  int rankRows() const;

 private:
  QLabel* model_;
  QLabel* engine_;
  QTreeWidget* ranks_;
  QLabel* job_;
  QProgressBar* progress_;
};

// Bytes of the parameters one rank holds (its shards), from the module tree.
int64_t weightBytesPerRank(const ModelInfo& model);

}  // namespace shardscope::ui
