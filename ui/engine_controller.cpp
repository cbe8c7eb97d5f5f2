#include "engine_controller.h"

#include <QMetaObject>
#include <QTimer>
#include <chrono>

#include "core/error.h"
#include "core/model/tokenizer.h"
#include "core/store/run_recorder.h"
#include "core/trace/local_engine_connection.h"
#include "core/trace/source_location.h"
#if SHARDSCOPE_WITH_REMOTE
#include "core/remote/access_token.h"
#include "core/remote/remote_engine_connection.h"
#endif

namespace shardscope::ui {
namespace {

// The module tree shows the port shapes of inspect's default prompt ("The capital of France is").
constexpr const char* kProbePrompt = "";

std::unique_ptr<EngineConnection> openConnection(const EngineSource& source,
                                                 const Engine::LoadProgress& progress) {
  if (source.address.empty())
    return std::make_unique<LocalEngineConnection>(source.local, progress, kProbePrompt);
#if SHARDSCOPE_WITH_REMOTE
  progress("connecting to " + source.address, 0, 1);
  const std::string token =
      source.tokenFile.empty() ? std::string() : remote::readTokenFile(source.tokenFile);
  return std::make_unique<remote::RemoteEngineConnection>(source.address, token, kProbePrompt);
#else
  throw Error("this ShardScope was built without gRPC, so it cannot connect to an engine server");
#endif
}

}  // namespace

EngineController::EngineController(QObject* parent) : QObject(parent), watch_(new QTimer(this)) {
  qRegisterMetaType<std::shared_ptr<const RunOutcome>>();
  qRegisterMetaType<std::shared_ptr<const ReplayOutcome>>();
  // An engine server can go away between jobs too: look every half second, without blocking.
  watch_->setInterval(500);
  connect(watch_, &QTimer::timeout, this, &EngineController::checkEngine);
}

EngineController::~EngineController() {
  stop();
  if (worker_.joinable()) worker_.join();
}

bool EngineController::remoteEngines() {
#if SHARDSCOPE_WITH_REMOTE
  return true;
#else
  return false;
#endif
}

std::shared_ptr<const Tokenizer> EngineController::tokenizer() const {
  return connection_ ? connection_->tokenizer() : nullptr;
}

const std::vector<PortShape>& EngineController::portShapes() const {
  static const std::vector<PortShape> none;
  return connection_ ? connection_->portShapes() : none;
}

QString EngineController::engineText() const {
  return connection_ ? QString::fromStdString(connection_->describe()) : QString();
}

JobProgress EngineController::progress() const {
  if (connection_ && busy_) {
    const JobProgress p = connection_->progress();
    if (p.total > 0) return p;
  }
  std::lock_guard lock(jobMutex_);
  return job_.state() ? job_.progress() : JobProgress{};
}

void EngineController::markLost(const QString& why) {
  if (lost_ || !connection_) return;
  lost_ = true;
  watch_->stop();
  Q_EMIT engineLost(why);
}

void EngineController::checkEngine() {
  if (connection_ && connection_->lost())
    markLost(tr("the engine %1 cannot be reached").arg(engineText()));
}

QString EngineController::openSession(const QString& path) {
  if (busy_) return tr("wait for the running job to end, or stop it");
  try {
    session_ = std::make_unique<store::SessionStore>(path.toStdString());
  } catch (const std::exception& e) {
    return QString::fromStdString(e.what());
  }
  Q_EMIT sessionChanged();
  return {};
}

bool EngineController::start(std::function<void()> work) {
  if (busy_) {
    Q_EMIT requestRefused(tr("The engine is busy; wait for the running job or press Stop."));
    return false;
  }
  if (worker_.joinable()) worker_.join();  // the previous worker has ended
  busy_ = true;
  stopRequested_ = false;
  Q_EMIT busyChanged(true);
  worker_ = std::thread(std::move(work));
  return true;
}

// Called on the GUI thread (queued) when a worker's work has ended.
void EngineController::finish() {
  busy_ = false;
  {
    std::lock_guard lock(jobMutex_);
    job_ = JobHandle();
  }
  Q_EMIT busyChanged(false);
}

void EngineController::loadModel(const EngineOptions& options) {
  EngineSource source;
  source.local = options;
  open(source);
}

void EngineController::reconnect() {
  open(source_);
}

void EngineController::open(const EngineSource& source) {
  if (busy_) {
    Q_EMIT requestRefused(tr("The engine is busy; wait for the running job or press Stop."));
    return;
  }
  watch_->stop();
  connection_.reset();  // free the old model before loading the next: both may not fit
  lost_ = false;
  source_ = source;
  start([this, source] {
    std::unique_ptr<EngineConnection> connection;
    QString error;
    try {
      connection = openConnection(source, [this](const std::string& what, int done, int total) {
        if (stopRequested_) throw Cancelled("loading was cancelled");
        QMetaObject::invokeMethod(
            this,
            [this, w = QString::fromStdString(what), done, total] {
              Q_EMIT loadProgress(w, done, total);
            },
            Qt::QueuedConnection);
      });
      if (stopRequested_) throw Cancelled("loading was cancelled");
    } catch (const std::exception& e) {
      connection.reset();
      error = QString::fromStdString(e.what());
    }
    QMetaObject::invokeMethod(
        this,
        [this, c = std::make_shared<std::unique_ptr<EngineConnection>>(std::move(connection)),
         error]() mutable {
          connection_ = std::move(*c);
          finish();
          if (!connection_) {
            Q_EMIT loadFailed(error);
            return;
          }
          watch_->start();
          Q_EMIT modelLoaded();
        },
        Qt::QueuedConnection);
  });
}

void EngineController::runScripts(std::vector<ScriptRequest> scripts) {
  if (!connection_) {
    Q_EMIT requestRefused(tr("Open a model first."));
    return;
  }
  if (!session_) {
    Q_EMIT requestRefused(tr("Open a session file first."));
    return;
  }
  batchSize_ = int(scripts.size());
  batchIndex_ = 0;
  start([this, scripts = std::move(scripts)] {
    bool cancelled = false;
    for (size_t i = 0; i < scripts.size() && !stopRequested_; ++i) {
      batchIndex_ = int(i);
      runOne(scripts[i], int(i), int(scripts.size()));
    }
    cancelled = stopRequested_;
    QMetaObject::invokeMethod(
        this,
        [this, cancelled] {
          finish();
          Q_EMIT batchFinished(cancelled);
          Q_EMIT sessionChanged();
        },
        Qt::QueuedConnection);
  });
}

void EngineController::runOne(const ScriptRequest& request, int index, int size) {
  auto outcome = std::make_shared<RunOutcome>();
  outcome->title = request.title;
  outcome->view = request.view;
  outcome->script = request.script;
  outcome->batchIndex = index;
  outcome->batchSize = size;
  QString lost;
  const auto t0 = std::chrono::steady_clock::now();
  try {
    const auto recorded = store::runRecorded(*session_, *connection_, request.script, "gui.py",
                                             request.title, {}, &outcome->runId, request.view);
    outcome->runId = recorded.id;
  } catch (const trace::ScriptError& e) {
    outcome->status = store::RunStatus::Failed;
    outcome->error = e.what();
    outcome->errorLine = e.location().line;
    outcome->errorColumn = e.location().column;
  } catch (const Cancelled& e) {
    outcome->status = store::RunStatus::Interrupted;
    outcome->error = e.what();
  } catch (const EngineLost& e) {
    outcome->status = store::RunStatus::Failed;
    outcome->error = e.what();
    lost = QString::fromStdString(e.what());
    stopRequested_ = true;  // the rest of a batch would fail alike
  } catch (const std::exception& e) {
    outcome->status = store::RunStatus::Failed;
    outcome->error = e.what();
  }
  outcome->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  outcome->result = connection_->result();
  QMetaObject::invokeMethod(
      this,
      [this, outcome, lost] {
        if (!lost.isEmpty()) markLost(lost);
        Q_EMIT runFinished(outcome);
        Q_EMIT sessionChanged();
      },
      Qt::QueuedConnection);
}

void EngineController::replay(int64_t runId) {
  if (!session_) return;
  start([this, runId] {
    auto outcome = std::make_shared<ReplayOutcome>();
    try {
      store::ReplayOptions o;
      o.run.out = [](const std::string&) {};
      o.run.note = [](const std::string&) {};
      const auto original = session_->run(runId, /*withValueData=*/false);
      // The open model serves the replay when it is the model the run was recorded on.
      if (connection_ && !original.result.models.empty()) {
        const auto& m = original.result.models[0];
        const ModelInfo& info = connection_->info();
        if (m.spec == info.spec && m.tp == info.tp && m.dtype == info.dtype &&
            m.device == info.device && m.configSha256 == info.configSha256 &&
            m.expertParallel == info.expertParallel)
          o.connection = connection_.get();
      }
      o.run.onJob = [this](const JobHandle& job) {
        std::lock_guard lock(jobMutex_);
        job_ = job;
      };
      outcome->report = store::replayRun(*session_, runId, o);
    } catch (const std::exception& e) {
      outcome->error = e.what();
    }
    QMetaObject::invokeMethod(
        this,
        [this, outcome] {
          finish();
          Q_EMIT replayFinished(outcome);
          Q_EMIT sessionChanged();
        },
        Qt::QueuedConnection);
  });
}

void EngineController::stop() {
  stopRequested_ = true;
  if (connection_ && busy_) connection_->cancel();
  std::lock_guard lock(jobMutex_);
  if (job_.state()) job_.cancel();
}

}  // namespace shardscope::ui
