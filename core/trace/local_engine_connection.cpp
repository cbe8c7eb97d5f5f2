#include "local_engine_connection.h"

#include "../engine/module_tree_text.h"
#include "script_runner.h"

namespace shardscope {

LocalEngineConnection::LocalEngineConnection(EngineOptions options, Engine::LoadProgress progress,
                                             const std::string& prompt)
    : engine_(std::make_unique<Engine>(std::move(options), std::move(progress))) {
  shapes_ = probePortShapes(*engine_, probeIds(*engine_, prompt));
}

LocalEngineConnection::~LocalEngineConnection() = default;

std::string LocalEngineConnection::describe() const {
  const ModelInfo& m = engine_->info();
  // Appended piece by piece: g++ 12 misreads the inlined temporaries of one long `+` chain
  // (a false -Warray-bounds, GCC bug 105329).
  std::string text = "ShardScope " SHARDSCOPE_VERSION " in this process: ";
  text += std::to_string(m.tp * m.pp) + " rank threads (" + m.backend + ", " + m.device + ")";
  return text;
}

void LocalEngineConnection::run(const std::string& source, const std::string& file) {
  {
    std::lock_guard lock(mutex_);
    cancelled_ = false;
    job_ = JobHandle();
  }
  trace::RunOptions o;
  o.engine = engine_.get();
  o.out = [](const std::string&) {};  // prints are kept in the run's record
  o.note = [](const std::string&) {};
  o.onJob = [this](const JobHandle& job) {
    std::lock_guard lock(mutex_);
    job_ = job;
    if (cancelled_) job_.cancel();
  };
  trace::ScriptRunner runner(o);
  try {
    runner.run(source, file);
  } catch (...) {
    result_ = runner.result();
    throw;
  }
  result_ = runner.result();
}

void LocalEngineConnection::cancel() {
  std::lock_guard lock(mutex_);
  cancelled_ = true;
  if (job_.state()) job_.cancel();
}

JobProgress LocalEngineConnection::progress() const {
  std::lock_guard lock(mutex_);
  return job_.state() ? job_.progress() : JobProgress{};
}

}  // namespace shardscope
