// Interleaver: runs each invoke's block as a coroutine ("mediator") on this rank and serves it the
// ports it waits on as the model reaches them (SPEC §3, TRACE.md §5-6). At a port visit nobody
// waits on it costs one comparison per mediator; otherwise the visit gathers the port once
// (all-gather, or all-reduce for partial sums), serves every waiting mediator its own rows as views
// of that whole, and if anything was written copies this rank's shard back into the model.
//
// Every rank runs the same blocks on the same whole values, so every rank makes the same
// collectives in the same order; errors are raised identically on every rank.
//
// Pipeline stages: the block runs on every rank of every stage. At a port a block waits on, the
// stage visiting it gathers over its tensor-parallel group and shares the whole with every rank
// (visitShared on the others, which follow that stage's turn); only that stage writes back.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_set>
#include <vector>

#include "../engine/rank_context.h"
#include "../model/port_observer.h"
#include "ast.h"
#include "memory_budget.h"
#include "value.h"

namespace shardscope {
class Tokenizer;
}

namespace shardscope::trace {

class Mediator;
class Environment;

struct InvokeSpec {
  Block body;
  // Driver names, by value; the first invoke's serve every invoke (they share one scope).
  std::map<std::string, Value> captured;
  std::string tracerName;  // the `as` name of the trace, if any
  int64_t requests = 1;    // its prompts: one request each, numbered after the earlier invokes'
  // The driver's global scope: a function made there or in a call of a driver function, and
  // captured, is copied to each rank (rankCopies) into blockFunctions, with the call scopes it
  // closes over copied into blockScopes. The Interleaver binds the copies to the block, gives the
  // outermost copied scopes the block's scope as parent and then sets each copy's closure (the
  // block's scope for a global function), so that they use the rank's copies of the driver names,
  // as the block does. Until then no copied function holds itself through its closure.
  struct BlockFunction {
    Value function;
    std::shared_ptr<Environment> closure;  // its copied call scope; null: the block's scope
  };
  const Environment* driverScope = nullptr;
  std::vector<BlockFunction> blockFunctions = {};
  std::vector<std::shared_ptr<Environment>> blockScopes = {};
};

// What rank 0 reports after the trace.
struct TraceOutput {
  std::map<std::string, Value> saved;  // name -> value on the CPU
  std::set<std::string> unsaved;       // assigned in a block but never saved
  std::vector<std::string> printed;
};

class Interleaver : public PortObserver {
 public:
  Interleaver(RankContext& ctx, std::shared_ptr<const Program> program,
              const std::vector<InvokeSpec>& invokes, std::shared_ptr<const Tokenizer> tokenizer,
              long long budget, const MemoryBudget& memory = MemoryBudget(0));
  ~Interleaver() override;

  // Makes a module outside the model's tree addressable by its path (test seam for synthetic
  // ports).
  void registerModule(const Module& m);
  // Runs every block up to its first wait (before the model starts).
  void start();
  void visit(const Module& module, PortRole role, PortValue& value,
             const ForwardBatch& batch) override;
  void visitShared(const Module& module, PortRole role, PortValue& whole,
                   const ForwardBatch& batch) override;
  void endStep(const ForwardBatch& batch, const std::vector<bool>& finished) override;
  bool stopRequested(int64_t request) const override;
  bool watchesForward() const override { return blocksLeft(); }
  int64_t firstLayerNeeded(int64_t step, int64_t numLayers) const override;
  void layersReplayed(int64_t begin, int64_t end, const ForwardBatch& batch) override;
  bool tellsPortWaits() const override { return true; }
  bool waitsOn(const Module& module, PortRole role, int64_t step) const override;
  void portPassed(const Module& module, PortRole role, const ForwardBatch& batch) override;
  void finish(const std::vector<std::vector<int64_t>>& generated) override;
  // Rank 0's saved values and prints (call after finish()).
  TraceOutput output() const;

  // For mediators: the state of the model's walk.
  RankContext& rank() { return ctx_; }
  int64_t currentStep() const { return currentStep_; }
  bool visitedThisStep(const Module* m, PortRole role) const;
  const Module* findModule(const std::string& path) const;
  const Tokenizer* tokenizer() const { return tokenizer_.get(); }
  const std::shared_ptr<const Tokenizer>& sharedTokenizer() const { return tokenizer_; }
  bool reporter() const { return ctx_.reports; }
  // Why `name` is not defined for `asking` when another invoke assigns it but has not yet reached
  // that line (a cross-invoke ordering error); empty when no other invoke assigns it.
  std::string undefinedName(const Mediator& asking, const std::string& name) const;
  void print(const std::string& line) { printed_.push_back(line); }
  // The request's stop strings: tracer.result's text ends before them, as vLLM reports it.
  void setStopStrings(std::vector<std::string> stop) { stop_ = std::move(stop); }
  // Whether `t` shares storage with a port value handed to a block (model memory or a gathered
  // buffer that is scattered back): saving it must copy it.
  bool viewsPortValue(const at::Tensor& t) const;
  // The kinds of the modules a script can call with whole tensors, for error messages.
  std::string callableKinds() const;
  // Expires with this interleaver: what the functions of its blocks check (FunctionDef::block).
  std::weak_ptr<const void> lifetime() const { return lifetime_; }

 private:
  void resume(Mediator& m);
  void enterStep(int64_t step);
  // Whether a block has not ended yet; once none can run again, visits need no bookkeeping.
  bool blocksLeft() const;
  void noteVisit(const Module& module, PortRole role, int64_t step);
  // Resumes every mediator waiting on this port with its rows of the whole values; whether any of
  // them wrote into a tensor meanwhile (their interpreters' takeTensorWrite).
  bool serve(const Module& module, PortRole role, const std::vector<at::Tensor>& wholes, bool tuple,
             const ForwardBatch& batch);

  RankContext& ctx_;
  std::shared_ptr<const Program> program_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  // Expires with the interleaver: its blocks' functions and builtins must not outlive it.
  const std::shared_ptr<const int> lifetime_ = std::make_shared<const int>(0);
  std::shared_ptr<Environment> scope_;  // one scope for all invokes: patching across invokes
  // The rank's copies of driver call scopes (InvokeSpec::blockScopes), freed with scope_.
  std::vector<std::shared_ptr<Environment>> copiedScopes_;
  std::vector<std::unique_ptr<Mediator>> mediators_;
  const std::map<std::string, const Module*>* index_;  // path -> module, owned by the model
  std::map<std::string, const Module*> extra_;         // registerModule()
  int64_t currentStep_ = -1;
  std::vector<std::pair<const Module*, PortRole>> visited_;
  int64_t replayedThrough_ = 0;  // layers below this ran as a graph in the current step
  // With stages: whose turn it is in the current step (stages(): every turn has passed).
  int runningStage_ = 0;
  std::vector<std::string> printed_;
  std::unordered_set<const void*> servedStorages_;  // storages of port values handed out
  std::vector<std::string> stop_;
  std::vector<bool> requestEnded_;  // by request: it finished in an earlier step or this one
};

}  // namespace shardscope::trace
