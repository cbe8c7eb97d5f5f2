// RemoteEngineConnection: an EngineConnection to a shardscope-engine server (the GUI's Connect to
// engine). Connecting says hello and asks the engine to describe its model (module tree, port
// shapes, tokenizer), so the client shows it as it shows a model loaded in this process; scripts
// run on the engine's rank processes and their results and progress stream back. Every run's
// models name the engine (describe()) for the session log. No gRPC in this header.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "core/trace/engine_connection.h"

namespace shardscope::remote {

class EngineClient;

class RemoteEngineConnection : public EngineConnection {
 public:
  // Throws Error when the engine cannot be reached, refuses the token or the protocol version, or
  // cannot describe its model. `token` empty: none is sent.
  RemoteEngineConnection(const std::string& address, const std::string& token,
                         const std::string& prompt, double connectSeconds = 10);
  ~RemoteEngineConnection() override;

  const ModelInfo& info() const override { return info_; }
  std::shared_ptr<const Tokenizer> tokenizer() const override { return tokenizer_; }
  const std::vector<PortShape>& portShapes() const override { return shapes_; }
  std::string describe() const override;
  void run(const std::string& source, const std::string& file) override;
  const trace::RunResult& result() const override { return result_; }
  void cancel() override;
  JobProgress progress() const override { return {step_.load(), total_.load()}; }
  bool lost() const override;

 private:
  std::unique_ptr<EngineClient> client_;
  ModelInfo info_;
  std::vector<PortShape> shapes_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  trace::RunResult result_;
  std::atomic<int64_t> step_{0}, total_{0};
  mutable std::atomic<bool> lost_{false};  // latched once the engine is gone
};

}  // namespace shardscope::remote
