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
      current_(current),
      spec_(new QLineEdit(this)),
      tp_(new QSpinBox(this)),
      pp_(new QSpinBox(this)),
      device_(new QComboBox(this)),
      dtype_(new QComboBox(this)),
      threads_(new QSpinBox(this)) {
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
  pp_->setObjectName("pipelineStages");
  pp_->setRange(1, 64);
  pp_->setValue(current.pp);
  pp_->setToolTip(
      tr("vLLM's pipeline_parallel_size: the decoder layers split into this many "
         "stages, each sharded tensor-parallel."));
  form->addRow(tr("Pipeline stages"), pp_);
  device_->setObjectName("device");
  device_->addItem("cpu");
  if (gpus > 0) device_->addItem("cuda");
  device_->setCurrentText(toString(current.device));
  form->addRow(tr("Device"), device_);
  dtype_->addItems({"auto", "bf16", "f16", "f32"});
  dtype_->setCurrentText(QString::fromStdString(modelDtypeName(current.dtype)));
  form->addRow(tr("Dtype"), dtype_);
  threads_->setObjectName("threadsPerRank");
  threads_->setRange(0, 1024);
  threads_->setSpecialValueText(tr("auto"));
  threads_->setValue(current.threadsPerRank);
  threads_->setToolTip(
      tr("ATen/OpenBLAS threads of each CPU rank. Auto: one for a model of at "
         "most 64M parameters (more only waits on a busy machine), else the "
         "cores divided among the ranks."));
  form->addRow(tr("CPU threads per rank"), threads_);
  const auto followDevice = [this] { threads_->setEnabled(device_->currentText() == "cpu"); };
  followDevice();
  connect(device_, &QComboBox::currentTextChanged, this, followDevice);
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
  EngineOptions o = current_;
  o.model = spec_->text().trimmed().toStdString();
  o.tp = tp_->value();
  o.pp = pp_->value();
  o.device = parseDeviceKind(device_->currentText().toStdString());
  o.dtype = parseModelDtype(dtype_->currentText().toStdString());
  o.threadsPerRank = threads_->value();
  return o;
}

}  // namespace shardscope::ui
