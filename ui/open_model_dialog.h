// OpenModelDialog: which model to load (the demo, a checkpoint folder or a Hugging Face cache
// name) and how (tp, pp, device, dtype, CPU threads per rank). Options it does not show (the
// backend, expert parallelism, dcp) are kept from the current ones.
#pragma once

#include <QDialog>

#include "core/engine/engine_types.h"

class QComboBox;
class QLineEdit;
class QSpinBox;

namespace shardscope::ui {

class OpenModelDialog : public QDialog {
  Q_OBJECT
 public:
  OpenModelDialog(const EngineOptions& current, int gpus, QWidget* parent = nullptr);
  EngineOptions options() const;

 private:
  EngineOptions current_;
  QLineEdit* spec_;
  QSpinBox* tp_;
  QSpinBox* pp_;
  QComboBox* device_;
  QComboBox* dtype_;
  QSpinBox* threads_;  // 0 ("auto"): intra_op_threads.h's default
};

}  // namespace shardscope::ui
