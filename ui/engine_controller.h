// EngineController: the GUI's one door into core. It owns the open model, an EngineConnection
// (rank threads in this process, or a shardscope-engine server it connected to: the same calls
// either way), and the open session file, and does all engine work on a worker thread: loading a
// model or connecting, running scripts (each recorded in the session log), replays. Results come
// back to the GUI thread as queued signals carrying immutable snapshots, so the window never
// blocks on the engine. A connection whose engine goes away (a run fails with EngineLost, or the
// periodic check finds it unreachable) is reported once by engineLost(); reconnect() opens the
// same engine again.
//
// Threading: call every method from the GUI thread. One piece of work at a time: a request while
// busy() is refused with requestRefused(). progress() may be polled while busy.
#pragma once

#include <QObject>
#include <QString>
#include <atomic>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/engine/engine.h"
#include "core/engine/port_probe.h"
#include "core/store/replay.h"
#include "core/store/session_store.h"
#include "core/trace/engine_connection.h"

class QTimer;

namespace shardscope {
class Tokenizer;
}

namespace shardscope::ui {

struct ScriptRequest {
  std::string script;
  std::string title;
  store::RunView view;  // the view the GUI made it for (none: the editor's script)
};

// What one script run produced, as the views need it.
struct RunOutcome {
  int64_t runId = 0;
  std::string title;
  store::RunView view;
  std::string script;
  trace::RunResult result;
  store::RunStatus status = store::RunStatus::Done;  // or Failed, Interrupted
  std::string error;
  int errorLine = 0, errorColumn = 0;  // of a script error (1-based), else 0
  double seconds = 0;
  int batchIndex = 0, batchSize = 1;
};

struct ReplayOutcome {
  store::ReplayReport report;
  std::string error;
};

// Where a model is opened from: a model loaded in this process, or an engine server.
struct EngineSource {
  EngineOptions local;    // used when `address` is empty
  std::string address;    // HOST:PORT of a shardscope-engine server
  std::string tokenFile;  // the server's access token (mode 0600); empty: none
};

class EngineController : public QObject {
  Q_OBJECT
 public:
  explicit EngineController(QObject* parent = nullptr);
  ~EngineController() override;

  // Whether this build can connect to an engine server (it has gRPC).
  static bool remoteEngines();

  bool busy() const { return busy_; }
  bool hasModel() const { return connection_ != nullptr; }
  const ModelInfo& model() const { return connection_->info(); }
  std::shared_ptr<const Tokenizer> tokenizer() const;
  const std::vector<PortShape>& portShapes() const;
  // Where the open model runs (EngineConnection::describe); empty without a model.
  QString engineText() const;
  // The engine went away (engineLost() was sent) and no other model was opened since.
  bool engineIsLost() const { return lost_; }
  store::SessionStore* session() const { return session_.get(); }
  // Progress of the running job (step k of n) and, for batches, which script is running.
  JobProgress progress() const;
  std::pair<int, int> batchProgress() const { return {batchIndex_.load(), batchSize_.load()}; }

  // Opens (or creates) a session file; returns an error message, or empty on success.
  QString openSession(const QString& path);

  void loadModel(const EngineOptions& options);
  // Opens `source` (loads it here, or connects to the server and asks for its model).
  void open(const EngineSource& source);
  // Opens the last source again (after engineLost()).
  void reconnect();
  void runScripts(std::vector<ScriptRequest> scripts);
  void replay(int64_t runId);
  // Stops the running job (and the rest of a batch), or abandons a load.
  void stop();

 Q_SIGNALS:
  void loadProgress(const QString& what, int done, int total);
  void modelLoaded();
  void loadFailed(const QString& message);
  void runFinished(std::shared_ptr<const RunOutcome> outcome);
  void batchFinished(bool cancelled);
  void replayFinished(std::shared_ptr<const ReplayOutcome> outcome);
  void sessionChanged();
  void busyChanged(bool busy);
  void requestRefused(const QString& why);
  // The open model's engine went away (once per connection); `why` says what was seen.
  void engineLost(const QString& why);

 private:
  bool start(std::function<void()> work);
  void finish();
  void runOne(const ScriptRequest& request, int index, int size);
  // GUI thread: reports a lost engine once (from a failed run, or the periodic check).
  void markLost(const QString& why);
  void checkEngine();

  std::unique_ptr<EngineConnection> connection_;
  EngineSource source_;  // what open() last opened
  bool lost_ = false;
  QTimer* watch_;
  std::unique_ptr<store::SessionStore> session_;
  std::thread worker_;
  std::atomic<bool> busy_{false};
  std::atomic<bool> stopRequested_{false};
  std::atomic<int> batchIndex_{0}, batchSize_{0};
  // A replay that loads its own engine (the open one is another model): its job (guarded by
  // jobMutex_); scripts and replays on the open model go through connection_.
  mutable std::mutex jobMutex_;
  JobHandle job_;
};

}  // namespace shardscope::ui

Q_DECLARE_METATYPE(std::shared_ptr<const shardscope::ui::RunOutcome>)
Q_DECLARE_METATYPE(std::shared_ptr<const shardscope::ui::ReplayOutcome>)
