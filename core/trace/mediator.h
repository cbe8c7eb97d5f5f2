// Mediator: one invoke's block of a trace, run as a coroutine beside the model (nnsight's name for
// it). It is the interpreter's Host: module attributes, port reads and writes, module calls and
// steps go through it. It suspends where the block waits (a port, the start of a step, the
// result) and the Interleaver resumes it when the model gets there.
#pragma once

#include <ATen/ATen.h>

#include <exception>
#include <functional>
#include <memory>
#include <string>

#include "../model/module.h"
#include "coroutine.h"
#include "deferred_calls.h"
#include "interleaver.h"
#include "interpreter.h"

namespace shardscope {
struct ForwardBatch;
}

namespace shardscope::trace {

// "path.input" or "path.output", as messages name a port.
std::string portName(const Module* m, PortRole role);

class Mediator : public Host {
 public:
  Mediator(Interleaver& owner, int64_t invoke, int64_t firstRequest,
           std::shared_ptr<const Program> program, const InvokeSpec& spec,
           std::shared_ptr<Environment> scope, long long budget, const MemoryBudget& memory);

  // ---- state the interleaver reads ----
  enum class Wait { None, Port, Result, StepStart };
  Wait wait = Wait::None;
  Wait resumedFrom = Wait::None;  // what the block last waited on (None: it has not waited yet)
  const Module* waitModule = nullptr;
  PortRole waitRole = PortRole::Output;
  int64_t step = 0;
  int unbounded = 0;
  bool ended = false;
  bool stop = false;
  std::exception_ptr error;
  Value served;
  bool serving = false;
  const Module* servedModule = nullptr;
  PortRole servedRole = PortRole::Output;
  int64_t servedStep = -1;

  int64_t invoke() const { return invoke_; }
  // Its requests are firstRequest() .. firstRequest() + requests() - 1: one a prompt.
  int64_t firstRequest() const { return firstRequest_; }
  int64_t requests() const { return requests_; }
  bool covers(int64_t request) const {
    return request >= firstRequest_ && request < firstRequest_ + requests_;
  }
  const Block& body() const { return body_; }
  bool done() const { return co_->finished(); }
  void resume() { co_->resume(); }
  Interpreter& interpreter() { return *interp_; }
  Environment& env() { return *env_; }

  // ---- Host ----
  bool viewsModelMemory(const at::Tensor& t) const override;
  Value moduleAttribute(Interpreter& in, const Value& module, const std::string& name) override;

  void setModuleAttribute(Interpreter& in, const Value& module, const std::string& name,
                          const Value& v) override;

  Value moduleIndex(Interpreter& in, const Value& module, long long index) override;

  std::optional<long long> moduleLength(Interpreter& in, const Value& module) override;

  Value callModule(Interpreter& in, const Value& module, CallArgs& args) override;

  Value tracerAttribute(Interpreter& in, const Value&, const std::string& name) override;

  void runWith(Interpreter& in, const Stmt& with, const Value& context) override;

  void iterateSteps(Interpreter& in, const Value& range,
                    const std::function<bool(long long)>& body) override;

  void print(const std::string& line) override;

  std::string undefinedName(const std::string& name) override;
  std::weak_ptr<const void> blockLifetime() const override;

 private:
  void run();

  void suspend(Wait what);

  void awaitStepStart();

  Value readPort(Interpreter& in, const Module* m, PortRole role);

  const Module* resolve(Interpreter& in, const std::string& path);

  Value moduleProxyOrFail(Interpreter& in, const Module* parent, const std::string& path,
                          const std::string& name);

  Value wholeParameter(const Module* m, const std::string& name);

  at::Tensor gatheredParameter(const Module* m, const std::string& name);

  // The step's group and step, observed by nobody: a module called from a script visits no ports.
  ForwardBatch plain() const;
  // Runs a call of `m` made at `step` (on the stage holding `m`, with pipeline stages).
  std::vector<at::Tensor> runCall(const Module& m, std::vector<CallArg> args, int64_t step);

  Value tokenizerObject(Interpreter& in);

  Interleaver& owner_;
  int64_t invoke_;
  int64_t firstRequest_;
  int64_t requests_;
  Block body_;
  std::shared_ptr<Environment> env_;
  std::unique_ptr<Interpreter> interp_;
  // Row-wise module calls held to run batched (off with SHARDSCOPE_BATCH_CALLS=0).
  bool batchCalls_ = true;
  DeferredCalls calls_;
  std::unique_ptr<Coroutine> co_;
};

}  // namespace shardscope::trace
