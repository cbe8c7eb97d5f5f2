#include "connect_engine_dialog.h"

#include <QDialogButtonBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>

namespace shardscope::ui {

ConnectEngineDialog::ConnectEngineDialog(const QString& address, const QString& tokenFile,
                                         QWidget* parent)
    : QDialog(parent), address_(new QLineEdit(this)), tokenFile_(new QLineEdit(this)) {
  setWindowTitle(tr("Connect to engine"));
  auto* form = new QFormLayout(this);
  auto* hint = new QLabel(tr("A shardscope-engine started with mpirun (README, Engine server). "
                             "For another machine, forward its port over SSH "
                             "(docs/multi-node.md) and connect to the local end."),
                          this);
  hint->setWordWrap(true);
  form->addRow(hint);
  address_->setText(address.isEmpty() ? QString(kDefaultAddress) : address);
  address_->setPlaceholderText(kDefaultAddress);
  form->addRow(tr("Address (host:port)"), address_);
  auto* row = new QHBoxLayout;
  tokenFile_->setText(tokenFile);
  tokenFile_->setPlaceholderText(tr("none (a loopback engine needs no token)"));
  auto* browse = new QPushButton(tr("File..."), this);
  row->addWidget(tokenFile_, 1);
  row->addWidget(browse);
  form->addRow(tr("Token file"), row);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
  buttons->button(QDialogButtonBox::Ok)->setText(tr("Connect"));
  form->addRow(buttons);
  connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
  connect(browse, &QPushButton::clicked, this, [this] {
    const QString file = QFileDialog::getOpenFileName(this, tr("Access token file"));
    if (!file.isEmpty()) tokenFile_->setText(file);
  });
}

QString ConnectEngineDialog::address() const {
  const QString a = address_->text().trimmed();
  return a.isEmpty() ? QString(kDefaultAddress) : a;
}

QString ConnectEngineDialog::tokenFile() const {
  return tokenFile_->text().trimmed();
}

}  // namespace shardscope::ui
