// OpenModelDialog: which model to load (the demo, a checkpoint folder or a Hugging Face cache
// name) and how (tp, device, dtype).
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
  QLineEdit* spec_;
  QSpinBox* tp_;
  QComboBox* device_;
  QComboBox* dtype_;
};

}  // namespace shardscope::ui
