#include "interleaver.h"

#include <algorithm>
#include <map>
#include <new>
#include <unordered_set>
#include <vector>

#include "../engine/generation.h"
#include "../engine/pipeline_step.h"
#include "../model/module_call.h"
#include "../model/tokenizer.h"
#include "../parallel/collective_board.h"
#include "../parallel/shard_spec.h"
#include "driver_values.h"
#include "interpreter.h"
#include "mediator.h"
#include "scope_release.h"
#include "stage_reads.h"
#include "trace_device.h"

namespace shardscope::trace {

Interleaver::Interleaver(RankContext& ctx, std::shared_ptr<const Program> program,
                         const std::vector<InvokeSpec>& invokes,
                         std::shared_ptr<const Tokenizer> tokenizer, long long budget,
                         const MemoryBudget& memory)
    : ctx_(ctx), program_(std::move(program)), tokenizer_(std::move(tokenizer)) {
  index_ = &ctx.model.modulesByPath();
  scope_ = std::make_shared<Environment>(builtinScope());
  if (!invokes.empty()) {
    for (const auto& [k, v] : invokes[0].captured) scope_->set(k, v);
    if (!invokes[0].tracerName.empty()) {
      auto t = std::make_shared<Object>();
      t->type = Type::Tracer;
      scope_->set(invokes[0].tracerName, t);
    }
  }
  int64_t request = 0;
  for (size_t i = 0; i < invokes.size(); ++i) {
    mediators_.push_back(std::make_unique<Mediator>(*this, int64_t(i), request, program_,
                                                    invokes[i], scope_, budget, memory));
    request += invokes[i].requests;
  }
  requestEnded_.assign(size_t(request), false);
  // Last: from here the copies and the scope hold each other, a cycle that only this
  // interleaver's end releases (a constructor that threw above would have leaked it).
  if (!invokes.empty()) {
    copiedScopes_ = invokes[0].blockScopes;
    for (const auto& s : copiedScopes_) {
      if (!s->parent()) s->setParent(scope_);  // a copied call of a global function
    }
    for (const auto& [f, closure] : invokes[0].blockFunctions) {
      f->function->closure = closure ? closure : scope_;
      bindToBlock(*f->function, lifetime_);
    }
  }
}

void Interleaver::registerModule(const Module& m) {
  extra_[m.path()] = &m;
}

Interleaver::~Interleaver() {
  // What the block's names held is freed here, cycles included: a function defined in the block
  // closes over scope_, which holds it, and one defined in a call over the call's scope; a list
  // made in the block may hold itself, and so may a saved snapshot of one, or a list made in a
  // call that is over. What the driver still holds stays whole.
  try {
    std::vector<Value> roots;
    roots.reserve(scope_->vars().size());  // so that the names are all taken, or none
    for (const auto& [name, v] : scope_->vars()) roots.push_back(v);
    scope_->vars().clear();
    // scope_ itself, now empty, so that its functions' defaults are counted.
    std::vector<std::shared_ptr<Environment>> scopes{scope_};
    for (auto& scope : copiedScopes_) scopes.push_back(std::move(scope));
    copiedScopes_.clear();
    for (const auto& m : mediators_) {
      for (const auto& [name, v] : m->interpreter().savedSnapshots()) roots.push_back(v);
      for (auto& scope : m->interpreter().functionScopes()) scopes.push_back(std::move(scope));
      // Cycles that no scope reaches any more (a list that held itself in a call now over).
      for (Value& v : m->interpreter().cycleCandidates()) roots.push_back(std::move(v));
    }
    mediators_.clear();
    releaseCycles(std::move(roots), std::move(scopes));
  } catch (const std::bad_alloc&) {  // out of memory for the walk: the cycles stay, nothing else
  }
}

const Module* Interleaver::findModule(const std::string& path) const {
  if (auto it = index_->find(path); it != index_->end()) return it->second;
  auto it = extra_.find(path);
  return it == extra_.end() ? nullptr : it->second;
}

std::string Interleaver::callableKinds() const {
  std::set<std::string> kinds;
  for (const auto* modules : {index_, &extra_}) {
    for (const auto& [path, m] : *modules) {
      if (m->callableWithWhole()) kinds.insert(m->kind());
    }
  }
  std::string list;
  for (const auto& k : kinds) list += (list.empty() ? "" : ", ") + k;
  return list.empty() ? "none in this model" : list;
}

namespace {

// The decoder layer a module belongs to, or -1.
int64_t layerOf(const Module* m) {
  return m->layer().value_or(-1);
}

}  // namespace

bool Interleaver::visitedThisStep(const Module* m, PortRole role) const {
  // With stages: a port of a stage whose turn has passed (or not come) this step is decided by
  // the stage alone, alike on every rank; only the running stage's ports need the list.
  if (ctx_.pipeline && ctx_.model.portId(*m, role) >= 0) {
    const int owner = ctx_.model.portStage(*m, role);
    if (owner != kEveryStage && owner != runningStage_) return owner < runningStage_;
  }
  for (const auto& [vm, vr] : visited_) {
    if (vm == m && vr == role) return true;
  }
  const int64_t layer = layerOf(m);
  return layer >= 0 && layer < replayedThrough_;
}

int64_t Interleaver::firstLayerNeeded(int64_t step, int64_t numLayers) const {
  int64_t first = numLayers;
  for (const auto& m : mediators_) {
    if (m->wait != Mediator::Wait::Port || m->step != step) continue;
    const int64_t layer = layerOf(m->waitModule);
    if (layer >= 0) first = std::min(first, layer);  // ports outside the layers always run eagerly
  }
  return first;
}

void Interleaver::layersReplayed(int64_t begin, int64_t end, const ForwardBatch& batch) {
  enterStep(batch.step);
  runningStage_ = ctx_.stage();
  replayedThrough_ = std::max(replayedThrough_, end);
}

bool Interleaver::waitsOn(const Module& module, PortRole role, int64_t step) const {
  for (const auto& m : mediators_) {
    if (m->wait == Mediator::Wait::Port && m->waitModule == &module && m->waitRole == role &&
        m->step == step)
      return true;
  }
  return false;
}

void Interleaver::portPassed(const Module& module, PortRole role, const ForwardBatch& batch) {
  if (blocksLeft()) noteVisit(module, role, batch.step);
}

bool Interleaver::blocksLeft() const {
  return std::any_of(mediators_.begin(), mediators_.end(),
                     [](const std::unique_ptr<Mediator>& m) { return !m->done(); });
}

void Interleaver::enterStep(int64_t step) {
  if (step == currentStep_) return;
  currentStep_ = step;
  visited_.clear();
  replayedThrough_ = 0;
  runningStage_ = 0;
}

void Interleaver::noteVisit(const Module& module, PortRole role, int64_t step) {
  enterStep(step);
  visited_.emplace_back(&module, role);
  if (ctx_.pipeline && ctx_.model.portId(module, role) >= 0) {
    const int owner = ctx_.model.portStage(module, role);
    runningStage_ = owner == kEveryStage ? ctx_.stages() : owner;  // every stage: the step's end
  }
}

void Interleaver::resume(Mediator& m) {
  m.resume();
  if (m.error) std::rethrow_exception(m.error);
}

void Interleaver::start() {
  for (auto& m : mediators_) resume(*m);
}

void Interleaver::visit(const Module& module, PortRole role, PortValue& value,
                        const ForwardBatch& batch) {
  if (!blocksLeft()) return;  // no block asks which ports ran (an empty trace, or after the last)
  noteVisit(module, role, batch.step);
  if (!waitsOn(module, role, batch.step)) return;

  const ShardSpec& shard = module.port(role).shard;
  const std::string port = portName(&module, role);
  CollectiveSite site(port, batch.step);
  // A split or partial value's gather is a collective, which waits for the stream; a whole one is
  // served as it is, so wait here for any graph still running (PortObserver::visit).
  if (shard.kind == ShardKind::Whole) ctx_.group.waitForStream("a port read after graphs");
  std::vector<at::Tensor> wholes;
  for (const at::Tensor& t : value.items) wholes.push_back(gather(t, shard, ctx_.group));
  // Every other stage follows this one's turn and gets the whole value too.
  if (sharingStage(ctx_, module, role) >= 0)
    sharePortValue(ctx_, module, role, wholes, value.tuple);
  if (!serve(module, role, wholes, value.tuple, batch))
    return;  // only read: the model's tensors stay bit-identical
  value.written = true;
  for (size_t i = 0; i < value.items.size(); ++i)
    scatterBack(value.items[i], wholes[i], shard, ctx_.group);
}

void Interleaver::visitShared(const Module& module, PortRole role, PortValue& whole,
                              const ForwardBatch& batch) {
  if (!blocksLeft()) return;
  noteVisit(module, role, batch.step);
  serve(module, role, whole.items, whole.tuple, batch);  // the stage holding it re-shards writes
}

bool Interleaver::serve(const Module& module, PortRole role, const std::vector<at::Tensor>& wholes,
                        bool tuple, const ForwardBatch& batch) {
  bool written = false;
  const bool perRequest = module.port(role).perRequest;
  for (const at::Tensor& w : wholes) {
    if (w.defined() && w.has_storage()) servedStorages_.insert(w.storage().unsafeGetStorageImpl());
  }
  for (auto& m : mediators_) {
    if (!(m->wait == Mediator::Wait::Port && m->waitModule == &module && m->waitRole == role &&
          m->step == batch.step))
      continue;
    // The invoke's requests still in the step: consecutive spans, so their rows are one run.
    int64_t first = -1, spans = 0, tokens = 0;
    for (size_t k = 0; k < batch.spans.size(); ++k) {
      if (!m->covers(batch.spans[k].request)) continue;
      if (first < 0) first = int64_t(k);
      SS_ASSERT(int64_t(k) == first + spans &&
                    batch.spans[k].tokenStart == batch.spans[first].tokenStart + tokens,
                "an invoke's spans are not consecutive");
      ++spans;
      tokens += batch.spans[k].tokenCount;
    }
    if (first < 0) continue;  // every request of this invoke has ended
    std::vector<Value> items;
    for (const at::Tensor& w : wholes) {
      if (!w.defined()) {
        items.push_back(none());
      } else if (perRequest) {
        items.push_back(tensor(w.narrow(0, first, spans)));
      } else {
        items.push_back(tensor(w.narrow(0, batch.spans[first].tokenStart, tokens)));
      }
    }
    m->served = tuple ? trace::tuple(items) : items[0];
    m->serving = true;
    m->servedModule = &module;
    m->servedRole = role;
    m->servedStep = batch.step;
    m->interpreter().takeTensorWrite();  // a write before this visit is not one into this port
    resume(*m);
    written |= m->interpreter().takeTensorWrite();
    m->serving = false;
  }
  return written;
}

void Interleaver::endStep(const ForwardBatch& batch, const std::vector<bool>& finished) {
  for (size_t r = 0; r < finished.size() && r < requestEnded_.size(); ++r) {
    if (finished[r]) requestEnded_[r] = true;
  }
  // An invoke ends with the step in which the last of its requests ends.
  const auto endedNow = [&](const Mediator& m) {
    bool now = false;
    for (int64_t r = m.firstRequest(); r < m.firstRequest() + m.requests(); ++r) {
      if (!requestEnded_.at(size_t(r))) return false;
      now |= r < int64_t(finished.size()) && finished[size_t(r)];
    }
    return now;
  };
  for (auto& m : mediators_) {
    if (m->wait == Mediator::Wait::StepStart && m->step == batch.step + 1) {
      m->ended = endedNow(*m);
      resume(*m);
    }
    if (m->wait != Mediator::Wait::Port) continue;
    const std::string port = portName(m->waitModule, m->waitRole);
    if (m->step == batch.step) {
      const std::string never = m->waitModule->neverVisitedReason();
      m->interpreter().fail(
          "waited on " + port + " at step " + std::to_string(m->step) +
          ", but the model never reached it in that step" +
          (never.empty() ? "; check the module path and that the step exists" : "; " + never));
    }
    if (endedNow(*m)) {
      if (m->unbounded > 0) {
        m->ended = true;
        resume(*m);
        continue;
      }
      m->interpreter().fail(
          "waits for " + port + " at step " + std::to_string(m->step) + ", but " +
          (m->requests() > 1 ? "the invoke's requests" : "the request") + " ended after step " +
          std::to_string(batch.step) +
          "; raise max_tokens or use tracer.iter[:] to follow the request to its end");
    }
  }
}

bool Interleaver::viewsPortValue(const at::Tensor& t) const {
  return t.defined() && t.has_storage() &&
         servedStorages_.count(t.storage().unsafeGetStorageImpl()) > 0;
}

bool Interleaver::stopRequested(int64_t request) const {
  for (const auto& m : mediators_) {
    if (m->covers(request)) return m->stop;
  }
  return false;
}

void Interleaver::finish(const std::vector<std::vector<int64_t>>& generated) {
  for (auto& m : mediators_) {
    if (m->wait == Mediator::Wait::StepStart) {  // an unbounded loop after its request ended
      m->ended = true;
      resume(*m);
    }
    if (m->wait == Mediator::Wait::Port) {
      m->interpreter().fail("waits for " + portName(m->waitModule, m->waitRole) + " at step " +
                            std::to_string(m->step) + ", but generation ended before it");
    }
    if (m->wait != Mediator::Wait::Result) continue;
    std::vector<Value> results;  // one RequestOutput a prompt
    for (int64_t r = m->firstRequest(); r < m->firstRequest() + m->requests(); ++r) {
      const auto& ids = generated.at(size_t(r));
      std::vector<Value> idValues;
      for (int64_t id : ids) idValues.push_back(integer(id));
      auto completion = std::make_shared<Object>();
      completion->type = Type::ResultObject;
      completion->str = "CompletionOutput";
      completion->attributes["text"] = string(completionText(tokenizer_.get(), ids, stop_));
      completion->attributes["token_ids"] = list(idValues);
      auto result = std::make_shared<Object>();
      result->type = Type::ResultObject;
      result->str = "RequestOutput";
      result->attributes["outputs"] = list({completion});
      result->attributes["token_ids"] = list(idValues);
      results.push_back(result);
    }
    m->served = results.size() == 1 ? results[0] : list(results);
    resume(*m);
  }
  for (auto& m : mediators_) {
    if (!m->done())
      m->interpreter().fail(
          "the block is still waiting after the trace ended (tracer.result read twice?)");
  }
}

namespace {

bool binds(const Expr& target, const std::string& name) {
  if (target.kind == ExprKind::Name) return target.text == name;
  if (target.kind == ExprKind::Starred) return binds(*target.a, name);
  if (target.kind != ExprKind::Tuple && target.kind != ExprKind::List) return false;
  return std::any_of(target.items.begin(), target.items.end(),
                     [&](const ExprPtr& t) { return t && binds(*t, name); });
}

// The first statement of `body` that binds `name` in the block's own scope (not inside a def).
const Stmt* assignmentOf(const Block& body, const std::string& name) {
  for (const auto& s : body) {
    if (s->kind == StmtKind::Def) {
      if (s->op == name) return s.get();
      continue;
    }
    if (s->kind == StmtKind::Assign || s->kind == StmtKind::AugAssign || s->kind == StmtKind::For ||
        s->kind == StmtKind::With) {
      for (const auto& t : s->targets) {
        if (t && binds(*t, name)) return s.get();
      }
    }
    if (const Stmt* inner = assignmentOf(s->body, name)) return inner;
    if (const Stmt* inner = assignmentOf(s->orElse, name)) return inner;
  }
  return nullptr;
}

std::string stepSuffix(int64_t step, bool show) {
  return show ? " at step " + std::to_string(step) : "";
}

}  // namespace

std::string Interleaver::undefinedName(const Mediator& asking, const std::string& name) const {
  for (const auto& m : mediators_) {
    if (m.get() == &asking) continue;
    const Stmt* assignment = assignmentOf(m->body(), name);
    if (!assignment) continue;
    const std::string other = "invoke " + std::to_string(m->invoke() + 1);
    const std::string self = "invoke " + std::to_string(asking.invoke() + 1);
    const std::string head = "name '" + name + "' is not defined yet: it is assigned by " + other +
                             " (line " + std::to_string(assignment->at.line) + ")";
    const std::string advice =
        " (a cross-invoke ordering error: invokes share names, but each "
        "runs when the model reaches its ports); use it in " +
        self + " at a port the model reaches later, or assign it in " + other +
        " at an earlier one";
    // Where the asking invoke is now.
    const bool atPort = asking.resumedFrom == Mediator::Wait::Port && asking.serving;
    const bool stepsDiffer = !atPort || m->wait != Mediator::Wait::Port || m->step != asking.step;
    std::string here;
    if (atPort) {
      here = portName(asking.servedModule, asking.servedRole) +
             stepSuffix(asking.servedStep, stepsDiffer);
    } else if (asking.resumedFrom == Mediator::Wait::None) {
      here = "the start of the trace, before the model runs";
    } else if (asking.resumedFrom == Mediator::Wait::StepStart) {
      here = "the start of step " + std::to_string(asking.step);
    } else {
      here = "the end of generation";
    }
    const std::string cannot =
        ", so " + self + " cannot use it " + (atPort ? "there" : "at " + here);
    switch (m->wait) {
      case Mediator::Wait::Port: {
        const bool samePort = atPort && m->waitModule == asking.servedModule &&
                              m->waitRole == asking.servedRole && m->step == asking.servedStep;
        std::string reach;
        if (samePort) {
          reach = ", which is served to " + other + " after " + self +
                  " (at one port invokes are served in order)";
        } else if (atPort) {
          reach = ", which the model reaches after " + here;
        }
        return head + " at " + portName(m->waitModule, m->waitRole) +
               stepSuffix(m->step, stepsDiffer) + reach + cannot + advice;
      }
      case Mediator::Wait::StepStart:
        return head + " in step " + std::to_string(m->step) + cannot + advice;
      case Mediator::Wait::Result:
        return head + " after generation ends (it waits for tracer.result)" + cannot + advice;
      case Mediator::Wait::None:
        return "name '" + name + "' is not defined: " + other + " assigns it (line " +
               std::to_string(assignment->at.line) + ") but ended without running that line, so " +
               self + " cannot use it";
    }
  }
  return {};
}

TraceOutput Interleaver::output() const {
  TraceOutput out;
  out.printed = printed_;
  std::map<std::string, Value> kept;  // the saved values as the blocks left them
  for (const auto& m : mediators_) {
    for (const auto& name : m->interpreter().assignedGlobals()) {
      const Value* v = m->env().find(name);
      if (!v) continue;
      const auto& snapshots = m->interpreter().savedSnapshots();
      const auto snapshot = snapshots.find(name);
      if ((*v)->saved) {
        kept[name] = *v;
        out.unsaved.erase(name);
      } else if (snapshot != snapshots.end()) {
        kept[name] = snapshot->second;
        out.unsaved.erase(name);
      } else if (!kept.count(name)) {
        out.unsaved.insert(name);
      }
    }
  }
  for (const auto& [name, v] : kept) {
    // A function in a saved list or dict would outlive the block whose values it closes over (the
    // block's tracer.stop or a module's .whole hold the interleaver itself), as save() refuses for
    // one on its own.
    if (anyInside(v, [](const Value& x) {
          return x->type == Type::Function || x->type == Type::Builtin;
        }))
      throw RuntimeFailure("the saved value '" + name +
                           "' holds a function, which cannot leave its block: save what it "
                           "returns");
  }
  out.saved = savedOnHost(kept);
  return out;
}

}  // namespace shardscope::trace
