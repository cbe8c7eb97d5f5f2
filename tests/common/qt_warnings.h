// Collects the Qt warnings (qWarning, qCritical: Qt's own, QCustomPlot's, ours) a GUI suite
// causes, so the suite can fail on any: the GUI's output is meant to be quiet. Messages still
// reach the previous handler (Qt Test prints them). One collector at a time; create it in
// initTestCase(), after Qt Test has installed its own handler (which would replace this one).
#pragma once

#include <QMutex>
#include <QMutexLocker>
#include <QString>
#include <QStringList>
#include <QtGlobal>

namespace shardscope::test {

class QtWarnings {
 public:
  QtWarnings() {
    instance() = this;
    previous_ = qInstallMessageHandler(&QtWarnings::handle);
  }
  ~QtWarnings() {
    qInstallMessageHandler(previous_);
    instance() = nullptr;
  }
  QtWarnings(const QtWarnings&) = delete;
  QtWarnings& operator=(const QtWarnings&) = delete;

  // The warnings since the last call, one a line (empty when there were none).
  QString take() {
    QMutexLocker lock(&mutex_);
    const QString text = warnings_.join('\n');
    warnings_.clear();
    return text;
  }

 private:
  static QtWarnings*& instance() {
    static QtWarnings* current = nullptr;
    return current;
  }
  static void handle(QtMsgType type, const QMessageLogContext& context, const QString& message) {
    QtWarnings* self = instance();
    if (self && (type == QtWarningMsg || type == QtCriticalMsg)) {
      QMutexLocker lock(&self->mutex_);
      self->warnings_ << message;
    }
    if (self && self->previous_) self->previous_(type, context, message);
  }

  QtMessageHandler previous_ = nullptr;
  QMutex mutex_;
  QStringList warnings_;
};

}  // namespace shardscope::test
