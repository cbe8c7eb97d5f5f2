// LocalEngineConnection: an EngineConnection whose ranks are threads of this process (an Engine),
// each script run by a ScriptRunner whose VLLM(...) calls all use that engine.
#pragma once

#include <mutex>

#include "../engine/engine.h"
#include "engine_connection.h"

namespace shardscope {

class LocalEngineConnection : public EngineConnection {
 public:
  // Loads the model (blocking; `progress` may throw Cancelled to abandon the load) and probes its
  // port shapes with `prompt` (probeIds: empty for the default).
  LocalEngineConnection(EngineOptions options, Engine::LoadProgress progress,
                        const std::string& prompt);
  ~LocalEngineConnection() override;

  const ModelInfo& info() const override { return engine_->info(); }
  std::shared_ptr<const Tokenizer> tokenizer() const override { return engine_->tokenizer(); }
  const std::vector<PortShape>& portShapes() const override { return shapes_; }
  std::string describe() const override;
  void run(const std::string& source, const std::string& file) override;
  const trace::RunResult& result() const override { return result_; }
  void cancel() override;
  JobProgress progress() const override;
  bool lost() const override { return false; }

 private:
  std::unique_ptr<Engine> engine_;
  std::vector<PortShape> shapes_;
  trace::RunResult result_;
  mutable std::mutex mutex_;
  JobHandle job_;  // the running script's engine job (guarded by mutex_)
  bool cancelled_ = false;
};

}  // namespace shardscope
