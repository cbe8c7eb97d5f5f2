// EngineConnection: a loaded model that runs trace scripts, as a client that shows it (the GUI)
// sees it, wherever its ranks run: rank threads of this process (LocalEngineConnection) or the
// rank processes of a shardscope-engine server (remote::RemoteEngineConnection). The client holds
// one and never asks which. No LibTorch, no gRPC in this header.
//
// Threading: run() from one thread at a time (a worker); cancel(), progress() and lost() from any.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "../engine/engine_types.h"
#include "../engine/port_probe.h"
#include "../error.h"
#include "trace_record.h"

namespace shardscope {

class Tokenizer;

// The engine server a client was connected to went away (its message starts "engine lost").
class EngineLost : public Error {
 public:
  using Error::Error;
};

class EngineConnection {
 public:
  virtual ~EngineConnection() = default;

  virtual const ModelInfo& info() const = 0;
  // nullptr when the model has no tokenizer.json.
  virtual std::shared_ptr<const Tokenizer> tokenizer() const = 0;
  // The shape of every port for a short prompt (the module tree shows them).
  virtual const std::vector<PortShape>& portShapes() const = 0;
  // Where the model runs, as the session log records it: this process, or the engine server's
  // address, ranks, hosts, device and versions.
  virtual std::string describe() const = 0;

  // Runs a script to its end; throws as ScriptRunner::run does (ScriptError, Cancelled, Error),
  // and EngineLost when a remote engine went away. result() then holds what finished, its models
  // naming this connection's engine.
  virtual void run(const std::string& source, const std::string& file) = 0;
  virtual const trace::RunResult& result() const = 0;
  // Cancels the running script's engine job and the rest of the script.
  virtual void cancel() = 0;
  // The running engine job's progress (zeros between jobs).
  virtual JobProgress progress() const = 0;
  // Whether the engine has gone away (a remote server stopped or cannot be reached); a lost
  // connection stays lost: reconnecting makes a new one.
  virtual bool lost() const = 0;
};

}  // namespace shardscope
