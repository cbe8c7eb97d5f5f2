#include "open_model_dialog.h"

#include <QComboBox>
#include <QDialogButtonBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLineEdit>
#include <QPushButton>
#include <QSpinBox>

namespace shardscope::ui {

OpenModelDialog::OpenModelDialog(const EngineOptions& current, int gpus, QWidget* parent)
    : QDialog(parent),
      spec_(new QLineEdit(this)),
      tp_(new QSpinBox(this)),
      device_(new QComboBox(this)),
      dtype_(new QComboBox(this)) {
  setWindowTitle(tr("Open model"));
  auto* form = new QFormLayout(this);
  auto* row = new QHBoxLayout;
  spec_->setText(QString::fromStdString(current.model.empty() ? "demo" : current.model));
  spec_->setPlaceholderText(tr("demo, a checkpoint folder, or a cached name like Qwen/Qwen3-8B"));
  auto* browse = new QPushButton(tr("Folder..."), this);
  row->addWidget(spec_, 1);
  row->addWidget(browse);
  form->addRow(tr("Model"), row);
  tp_->setRange(1, 64);
  tp_->setValue(current.tp);
  form->addRow(tr("Tensor parallel"), tp_);
  device_->addItem("cpu");
  if (gpus > 0) device_->addItem("cuda");
  device_->setCurrentText(QString::fromStdString(current.device));
  form->addRow(tr("Device"), device_);
  dtype_->addItems({"auto", "bf16", "f16", "f32"});
  dtype_->setCurrentText(current.dtype.empty() ? "auto" : QString::fromStdString(current.dtype));
  form->addRow(tr("Dtype"), dtype_);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Open | QDialogButtonBox::Cancel, this);
  form->addRow(buttons);
  connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
  connect(browse, &QPushButton::clicked, this, [this] {
    const QString dir = QFileDialog::getExistingDirectory(this, tr("Checkpoint folder"));
    if (!dir.isEmpty()) spec_->setText(dir);
  });
}

EngineOptions OpenModelDialog::options() const {
  EngineOptions o;
  o.model = spec_->text().trimmed().toStdString();
  o.tp = tp_->value();
  o.device = device_->currentText().toStdString();
  o.dtype = dtype_->currentText() == "auto" ? "" : dtype_->currentText().toStdString();
  return o;
}

}  // namespace shardscope::ui
