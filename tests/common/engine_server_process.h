// A shardscope-engine server for a test: `mpirun -np N shardscope-engine ... --listen ADDRESS`
// (tests/mpirun_test.sh) started by the constructor and stopped when it goes away, and a free
// loopback port to listen on. Needs SHARDSCOPE_ENGINE (the binary's path) from the test's target.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <QElapsedTimer>
#include <QProcess>
#include <QRegularExpression>
#include <QStringList>

#include "test_support.h"

namespace shardscope::test {

inline int freePort() {
  const int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(s);
  return ntohs(a.sin_port);
}

// `mpirun -np N shardscope-engine ...` (tests/mpirun_test.sh), stopped when it goes away.
class EngineServerProcess {
 public:
  EngineServerProcess(int np, const QStringList& options, const QString& listen)
      : address_(listen) {
    QStringList args = {
        QString::fromStdString((test::sourceDir() / "tests/mpirun_test.sh").string()),
        QString::number(np), SHARDSCOPE_ENGINE};
    args << options << "--listen" << listen;
    p_.start("bash", args);
  }
  ~EngineServerProcess() { stop(); }

  // Waits for the serving line; false when the engine ended first (its error is in err()).
  bool waitServing(int ms = 300000) {
    QElapsedTimer t;
    t.start();
    while (t.elapsed() < ms) {
      if (err_.contains("shardscope-engine: serving")) return true;
      if (p_.state() == QProcess::NotRunning) return false;
      p_.waitForReadyRead(200);
      err_ += QString::fromUtf8(p_.readAllStandardError());
    }
    return false;
  }
  // Waits for the engine to end; its exit code, or -1 on timeout.
  int waitFinished(int ms) {
    if (!p_.waitForFinished(ms)) return -1;
    err_ += QString::fromUtf8(p_.readAllStandardError());
    return p_.exitCode();
  }
  QString err() {
    err_ += QString::fromUtf8(p_.readAllStandardError());
    return err_;
  }
  const QString& address() const { return address_; }
  // Rank r's pid, from the engine's "rank R: host H, pid P" lines.
  qint64 pidOf(int rank) {
    const QRegularExpression re(QString("rank %1: host \\S+, pid (\\d+)").arg(rank));
    const auto m = re.match(err());
    return m.hasMatch() ? m.captured(1).toLongLong() : -1;
  }
  void stop() {
    if (p_.state() == QProcess::NotRunning) return;
    p_.terminate();
    if (!p_.waitForFinished(20000)) p_.kill();
    p_.waitForFinished(5000);
  }

 private:
  QProcess p_;
  QString address_;
  QString err_;
};

}  // namespace shardscope::test
