#include "engine_controller.h"

#include <QMetaObject>
#include <chrono>

#include "core/error.h"
#include "core/model/tokenizer.h"
#include "core/store/run_recorder.h"
#include "core/trace/source_location.h"

namespace shardscope::ui {

EngineController::EngineController(QObject* parent) : QObject(parent) {
  qRegisterMetaType<std::shared_ptr<const RunOutcome>>();
  qRegisterMetaType<std::shared_ptr<const ReplayOutcome>>();
}

EngineController::~EngineController() {
  stop();
  if (worker_.joinable()) worker_.join();
}

std::shared_ptr<const Tokenizer> EngineController::tokenizer() const {
  return engine_ ? engine_->tokenizer() : nullptr;
}

JobProgress EngineController::progress() const {
  std::lock_guard lock(jobMutex_);
  return job_.state() ? job_.progress() : JobProgress{};
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
  if (busy_) {
    Q_EMIT requestRefused(tr("The engine is busy; wait for the running job or press Stop."));
    return;
  }
  engine_.reset();  // free the old model before loading the next: both may not fit
  portShapes_.clear();
  start([this, options] {
    std::unique_ptr<Engine> engine;
    std::vector<PortShape> shapes;
    QString error;
    try {
      engine =
          std::make_unique<Engine>(options, [this](const std::string& what, int done, int total) {
            if (stopRequested_) throw Cancelled("loading was cancelled");
            QMetaObject::invokeMethod(
                this,
                [this, w = QString::fromStdString(what), done, total] {
                  Q_EMIT loadProgress(w, done, total);
                },
                Qt::QueuedConnection);
          });
      if (stopRequested_) throw Cancelled("loading was cancelled");
      std::vector<int64_t> ids;
      if (auto tok = engine->tokenizer()) ids = tok->encode("The capital of France is");
      for (int64_t i = 0; ids.empty() && i < 5; ++i) ids.push_back(i);
      shapes = probePortShapes(*engine, ids);
    } catch (const std::exception& e) {
      engine.reset();
      error = QString::fromStdString(e.what());
    }
    QMetaObject::invokeMethod(
        this,
        [this, e = std::make_shared<std::unique_ptr<Engine>>(std::move(engine)),
         s = std::move(shapes), error]() mutable {
          engine_ = std::move(*e);
          portShapes_ = std::move(s);
          finish();
          if (engine_)
            Q_EMIT modelLoaded();
          else
            Q_EMIT loadFailed(error);
        },
        Qt::QueuedConnection);
  });
}

void EngineController::runScripts(std::vector<ScriptRequest> scripts) {
  if (!engine_) {
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
  outcome->script = request.script;
  outcome->batchIndex = index;
  outcome->batchSize = size;
  trace::RunOptions o;
  o.engine = engine_.get();
  o.out = [](const std::string&) {};  // prints are kept in the run's record
  o.note = [](const std::string&) {};
  o.onJob = [this](const JobHandle& job) {
    std::lock_guard lock(jobMutex_);
    job_ = job;
    if (stopRequested_) job_.cancel();
  };
  trace::ScriptRunner runner(o);
  const auto t0 = std::chrono::steady_clock::now();
  try {
    const auto recorded = store::runRecorded(*session_, runner, request.script, "gui.py",
                                             request.title, {}, &outcome->runId);
    outcome->runId = recorded.id;
  } catch (const trace::ScriptError& e) {
    outcome->status = "failed";
    outcome->error = e.what();
    outcome->errorLine = e.location().line;
    outcome->errorColumn = e.location().column;
  } catch (const Cancelled& e) {
    outcome->status = "interrupted";
    outcome->error = e.what();
  } catch (const std::exception& e) {
    outcome->status = "failed";
    outcome->error = e.what();
  }
  outcome->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  outcome->result = runner.result();
  QMetaObject::invokeMethod(
      this,
      [this, outcome] {
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
      // The loaded engine serves the replay when it is the model the run was recorded on.
      if (engine_ && !original.result.models.empty()) {
        const auto& m = original.result.models[0];
        const ModelInfo& info = engine_->info();
        if (m.spec == info.spec && m.tp == info.tp && m.dtype == info.dtype &&
            m.device == info.device && m.configSha256 == info.configSha256 &&
            m.expertParallel == info.expertParallel)
          o.run.engine = engine_.get();
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
  std::lock_guard lock(jobMutex_);
  if (job_.state()) job_.cancel();
}

}  // namespace shardscope::ui
