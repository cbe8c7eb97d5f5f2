// ConnectEngineDialog: where a shardscope-engine server listens (HOST:PORT; loopback by default)
// and, for one that needs it, the file holding its access token.
#pragma once

#include <QDialog>

class QLineEdit;

namespace shardscope::ui {

class ConnectEngineDialog : public QDialog {
  Q_OBJECT
 public:
  ConnectEngineDialog(const QString& address, const QString& tokenFile, QWidget* parent = nullptr);
  QString address() const;
  QString tokenFile() const;

  static constexpr const char* kDefaultAddress = "127.0.0.1:50051";

 private:
  QLineEdit* address_;
  QLineEdit* tokenFile_;
};

}  // namespace shardscope::ui
