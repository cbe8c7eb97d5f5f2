#include "interleaver.h"

#include <algorithm>

#include "../engine/generation.h"
#include "../engine/pipeline_step.h"
#include "../model/module_call.h"
#include "../model/tokenizer.h"
#include "../parallel/collective_board.h"
#include "../parallel/shard_spec.h"
#include "coroutine.h"
#include "interpreter.h"
#include "stage_reads.h"
#include "trace_device.h"

namespace shardscope::trace {
namespace {

std::string portName(const Module* m, PortRole role) {
  return m->path() + (role == PortRole::Input ? ".input" : ".output");
}

// Edit distance, for "did you mean" suggestions.
size_t distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      cur[j] =
          std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

Value toCpu(const Value& v) {
  if (v->type == Type::Tensor) {
    auto c = tensor(v->tensor.to(at::kCPU));
    c->saved = v->saved;
    return c;
  }
  if (v->type == Type::Tuple || v->type == Type::List) {
    std::vector<Value> items;
    for (const auto& i : v->items) items.push_back(toCpu(i));
    Value c = v->type == Type::List ? list(items) : tuple(items);
    c->saved = v->saved;
    return c;
  }
  return v;
}

// A script's arguments to a module or module method, at tensor level.
std::vector<CallArg> callArgs(const CallArgs& args, const std::string& callee,
                              const Interleaver& owner) {
  std::vector<CallArg> out;
  for (size_t i = 0; i < args.positional.size(); ++i) {
    const Value& v = args.positional[i];
    CallArg a;
    if (v->type == Type::Tensor) {
      a.tensor = v->tensor;
    } else if (v->type == Type::Int || v->type == Type::Bool) {
      a.integer = v->type == Type::Bool ? int64_t(v->boolValue) : int64_t(v->intValue);
    } else if (v->type == Type::Module && owner.findModule(v->str)) {
      a.module = owner.findModule(v->str);
    } else {
      throw RuntimeFailure(callee + "(): argument " + std::to_string(i + 1) +
                           " must be a tensor, an int or a module, got " + typeName(v->type));
    }
    out.push_back(std::move(a));
  }
  if (!args.keywords.empty())
    throw RuntimeFailure(callee + "() takes positional arguments only, got " +
                         args.keywords[0].first + "=");
  return out;
}

// One returned tensor is a tensor; several are a tuple (select_experts: weights and ids).
Value callResult(const std::vector<at::Tensor>& results) {
  if (results.size() == 1) return tensor(results[0]);
  std::vector<Value> items;
  for (const at::Tensor& t : results) items.push_back(tensor(t));
  return tuple(items);
}

}  // namespace

class Mediator : public Host {
 public:
  Mediator(Interleaver& owner, int64_t invoke, int64_t firstRequest,
           std::shared_ptr<const Program> program, const InvokeSpec& spec,
           std::shared_ptr<Environment> scope, long long budget, const MemoryBudget& memory)
      : owner_(owner),
        invoke_(invoke),
        firstRequest_(firstRequest),
        requests_(spec.requests),
        body_(spec.body),
        env_(std::move(scope)) {
    interp_ = std::make_unique<Interpreter>(std::move(program), *this, env_, budget, memory);
    co_ = std::make_unique<Coroutine>([this] { run(); });
  }

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
  bool viewsModelMemory(const at::Tensor& t) const override { return owner_.viewsPortValue(t); }
  Value moduleAttribute(Interpreter& in, const Value& module, const std::string& name) override {
    const Module* m = resolve(in, module->str);
    if (const Module* c = owner_.findModule(m->path() + "." + name); c && c->readsAsValue())
      return readPort(in, c, PortRole::Output);
    if (name == "output") return readPort(in, m, PortRole::Output);
    if (name == "input") return readPort(in, m, PortRole::Input);
    if (name == "inputs") return tuple({readPort(in, m, PortRole::Input)});
    if (const int holder = holdingStage(owner_.rank(), *m); holder < 0) {
      if (const Parameter* p = m->parameter(name)) return tensor(p->shard);
    } else if (name != "whole" && !m->method(name) && !owner_.findModule(m->path() + "." + name)) {
      // Another stage may hold it: every rank asks the holding stage (one world broadcast).
      if (auto shard = parameterFromStage(owner_.rank(), holder, *m, name)) return tensor(*shard);
    }
    if (name == "whole")
      return builtin("whole",
                     [this, m](CallArgs& a) { return wholeParameter(m, str(a.required(0))); });
    if (const ModuleMethod* method = m->method(name)) {
      return builtin(name, [this, m, method](CallArgs& a) {
        const std::string callee = m->path() + "." + method->name;
        const ForwardBatch batch = plain();
        try {
          return callResult(method->call(ModuleCall(callee, callArgs(a, callee, owner_), batch)));
        } catch (const ModuleCallError& e) {
          throw RuntimeFailure(std::string(e.what()) + " (usage: " + m->path() + "." +
                               method->usage + ")");
        }
      });
    }
    if (!m->parent() && name == "tokenizer") return tokenizerObject(in);
    return moduleProxyOrFail(in, m, m->path() + "." + name, name);
  }

  void setModuleAttribute(Interpreter& in, const Value& module, const std::string& name,
                          const Value& v) override {
    const Module* m = resolve(in, module->str);
    if (name != "output" && name != "input")
      in.fail("only .output and .input of a module can be assigned, not ." + name);
    Value current = readPort(in, m, name == "output" ? PortRole::Output : PortRole::Input);
    const auto write = [&](const Value& dst, const Value& src) {
      if (dst->type == Type::None) return;
      at::Tensor s = src->type == Type::Tensor ? src->tensor : toTensor(src, &dst->tensor);
      if (s.scalar_type() != dst->tensor.scalar_type()) {
        in.fail("cannot write a value of dtype " + dtypeRepr(s.scalar_type()) + " into " +
                portName(m, name == "output" ? PortRole::Output : PortRole::Input) +
                ", whose value has dtype " + dtypeRepr(dst->tensor.scalar_type()) +
                "; convert it first with .to(" + dtypeRepr(dst->tensor.scalar_type()) + ")");
      }
      if (!dst->tensor.sizes().equals(s.sizes())) {
        in.fail("cannot write a value of shape " + repr(sizeOf(s)) + " into " +
                portName(m, name == "output" ? PortRole::Output : PortRole::Input) +
                ", whose value has shape " + repr(sizeOf(dst->tensor)));
      }
      noteTensorWrite();
      dst->tensor.copy_(s);
    };
    if (current->type == Type::Tuple) {
      if ((v->type != Type::Tuple && v->type != Type::List) ||
          v->items.size() != current->items.size()) {
        in.fail("this port holds a tuple of " + std::to_string(current->items.size()) +
                "; assign a tuple of the same length");
      }
      for (size_t i = 0; i < v->items.size(); ++i) write(current->items[i], v->items[i]);
    } else {
      write(current, v);
    }
  }

  Value moduleIndex(Interpreter& in, const Value& module, long long index) override {
    const Module* m = resolve(in, module->str);
    if (index < 0) index += (long long)m->children().size();  // layers[-1]
    return moduleProxyOrFail(in, m, m->path() + "[" + std::to_string(index) + "]",
                             "[" + std::to_string(index) + "]");
  }

  Value callModule(Interpreter& in, const Value& module, CallArgs& args) override {
    const Module* m = resolve(in, module->str);
    if (!m->callableWithWhole()) {
      in.fail("calling " + m->path() + " (" + m->kind() +
              ") from a trace is not supported; callable modules: " + owner_.callableKinds());
    }
    const ForwardBatch batch = plain();
    const auto call = [&] {
      return m->callWhole(ModuleCall(m->path(), callArgs(args, m->path(), owner_), batch));
    };
    // With pipeline stages the stage holding the module runs it and shares the outputs.
    const int holder = holdingStage(owner_.rank(), *m);
    return callResult(holder < 0 ? call() : computeOnStage(owner_.rank(), holder, call));
  }

  Value tracerAttribute(Interpreter& in, const Value&, const std::string& name) override {
    if (name == "iter") {
      auto f = std::make_shared<Object>();
      f->type = Type::IterRange;
      f->str = "factory";
      return f;
    }
    if (name == "result") {
      suspend(Wait::Result);
      return served;
    }
    if (name == "stop")
      return builtin("stop", [this](CallArgs&) {
        stop = true;
        return none();
      });
    if (name == "invoke")
      in.fail("tracer.invoke(...) must be a `with` statement directly in the trace body");
    in.fail("the tracer has no attribute '" + name + "' (it has iter, result, stop, invoke)");
  }

  void runWith(Interpreter& in, const Stmt& with, const Value& context) override {
    if (context->type == Type::None) {  // e.g. torch.no_grad(): nothing to do
      in.run(with.body);
      return;
    }
    in.fail(
        "this `with` is not allowed inside a trace block (invokes belong directly in the trace "
        "body)");
  }

  void iterateSteps(Interpreter& in, const Value& range,
                    const std::function<bool(long long)>& body) override {
    if (range->str != "range")
      in.fail("iterate over tracer.iter[...] with a step or a range, e.g. tracer.iter[:8]");
    const int64_t outer = step;
    if (range->unbounded) ++unbounded;
    try {
      for (long long s = range->rangeStart; range->unbounded || s < range->rangeStop; ++s) {
        step = s;
        if (range->unbounded && s > 0 && owner_.currentStep() < s) {
          awaitStepStart();  // does step s exist? the model decides at the end of step s - 1
        }
        body(s);
      }
    } catch (const RequestEnded&) {
      if (!range->unbounded) throw;
    }
    if (range->unbounded) --unbounded;
    step = outer;
  }

  void print(const std::string& line) override {
    if (owner_.reporter()) owner_.print(line);
  }

  std::string undefinedName(const std::string& name) override {
    return owner_.undefinedName(*this, name);
  }

 private:
  void run() {
    setCurrentDevice(owner_.rank().device);
    try {
      interp_->run(body_);
    } catch (const RequestEnded&) {
      // the request ended during an unbounded iteration: nothing more to do
    } catch (...) {
      error = std::current_exception();
    }
    wait = Wait::None;
  }

  void suspend(Wait what) {
    wait = what;
    co_->yield();
    resumedFrom = what;
    wait = Wait::None;
  }

  void awaitStepStart() {
    suspend(Wait::StepStart);
    if (ended) {
      ended = false;
      throw RequestEnded{};
    }
  }

  Value readPort(Interpreter& in, const Module* m, PortRole role) {
    if (serving && servedModule == m && servedRole == role && servedStep == step) return served;
    const int64_t cur = owner_.currentStep();
    if (step < cur || (step == cur && owner_.visitedThisStep(m, role))) {
      in.fail("already ran past " + portName(m, role) + " at step " + std::to_string(step) +
              "; read ports in the order the model runs them, or move this read to a later step");
    }
    waitModule = m;
    waitRole = role;
    suspend(Wait::Port);
    if (ended) {
      ended = false;
      throw RequestEnded{};
    }
    return served;
  }

  const Module* resolve(Interpreter& in, const std::string& path) {
    const Module* m = owner_.findModule(path);
    if (!m) in.fail("unknown module " + path);
    return m;
  }

  Value moduleProxyOrFail(Interpreter& in, const Module* parent, const std::string& path,
                          const std::string& name) {
    if (owner_.findModule(path)) return moduleProxy(path);
    std::vector<std::pair<size_t, std::string>> near;
    for (const Module* c : parent->children()) {
      const std::string tail = c->path().substr(parent->path().size() +
                                                (c->path()[parent->path().size()] == '.' ? 1 : 0));
      near.emplace_back(distance(name, tail), tail);
    }
    std::sort(near.begin(), near.end());
    std::string hint;
    for (size_t i = 0; i < near.size() && i < 3; ++i) hint += (i ? ", " : "") + near[i].second;
    const std::string param = firstParameterName(owner_.rank(), *parent);
    in.fail(parent->path() + " has no module, port or parameter '" + name + "'" +
            (hint.empty() ? "" : "; nearest: " + hint) + "; ports are .input, .output, .inputs" +
            (param.empty() ? std::string() : "; parameters: ." + param));
  }

  Value wholeParameter(const Module* m, const std::string& name) {
    const int holder = holdingStage(owner_.rank(), *m);
    if (holder < 0) return tensor(gatheredParameter(m, name));
    return tensor(computeOnStage(owner_.rank(), holder, [&] {
      return std::vector<at::Tensor>{gatheredParameter(m, name)};
    })[0]);
  }

  at::Tensor gatheredParameter(const Module* m, const std::string& name) {
    const Parameter* p = m->parameter(name);
    if (!p) throw RuntimeFailure(m->path() + " has no parameter '" + name + "'");
    if (p->splitDim < 0) return p->shard.clone();
    const std::string where = m->path() + "." + name + ".whole()";
    CollectiveSite site(where, step);
    const int64_t dim = p->splitDim;
    ProcessGroup& group = owner_.rank().group;
    ShardSpec spec = ShardSpec::padded(ShardKind::Column, dim, p->fullShape[size_t(dim)]);
    spec.replicas = p->replicas;
    at::Tensor whole = gather(p->shard, spec, group);
    return group.size() == 1 ? whole.clone() : whole;  // never a view of the weights
  }

  // The step's group and step, observed by nobody: a module called from a script visits no ports.
  ForwardBatch plain() const {
    return ForwardBatch{owner_.rank().group, at::Tensor(), {}, nullptr, step, {}, {}};
  }

  Value tokenizerObject(Interpreter& in) {
    if (!owner_.tokenizer()) in.fail("this model has no tokenizer.json");
    return tokenizerValue(owner_.sharedTokenizer());
  }

  Interleaver& owner_;
  int64_t invoke_;
  int64_t firstRequest_;
  int64_t requests_;
  Block body_;
  std::shared_ptr<Environment> env_;
  std::unique_ptr<Interpreter> interp_;
  std::unique_ptr<Coroutine> co_;
};

Interleaver::Interleaver(RankContext& ctx, std::shared_ptr<const Program> program,
                         const std::vector<InvokeSpec>& invokes,
                         std::shared_ptr<const Tokenizer> tokenizer, long long budget,
                         const MemoryBudget& memory)
    : ctx_(ctx), program_(std::move(program)), tokenizer_(std::move(tokenizer)) {
  index_ = &ctx.model.modulesByPath();
  scope_ = std::make_shared<Environment>(builtinScope());
  scope_->set("print", printBuiltin([this](const std::string& line) {
                if (reporter()) print(line);
              }));
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
}

void Interleaver::registerModule(const Module& m) {
  extra_[m.path()] = &m;
}

Interleaver::~Interleaver() = default;

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
  noteVisit(module, role, batch.step);
  bool waited = false;
  for (const auto& m : mediators_) {
    waited |= m->wait == Mediator::Wait::Port && m->waitModule == &module && m->waitRole == role &&
              m->step == batch.step;
  }
  if (!waited) return;

  const ShardSpec& shard = module.port(role).shard;
  const std::string port = portName(&module, role);
  CollectiveSite site(port, batch.step);
  std::vector<at::Tensor> wholes;
  for (const at::Tensor& t : value.items) wholes.push_back(gather(t, shard, ctx_.group));
  // Every other stage follows this one's turn and gets the whole value too.
  if (sharingStage(ctx_, module, role) >= 0)
    sharePortValue(ctx_, module, role, wholes, value.tuple);
  takeTensorWrite();
  serve(module, role, wholes, value.tuple, batch);
  if (!takeTensorWrite()) return;  // only read: the model's tensors stay bit-identical
  for (size_t i = 0; i < value.items.size(); ++i)
    scatterBack(value.items[i], wholes[i], shard, ctx_.group);
}

void Interleaver::visitShared(const Module& module, PortRole role, PortValue& whole,
                              const ForwardBatch& batch) {
  noteVisit(module, role, batch.step);
  takeTensorWrite();
  serve(module, role, whole.items, whole.tuple, batch);
  takeTensorWrite();  // the stage holding the port applies the same writes
}

void Interleaver::serve(const Module& module, PortRole role, const std::vector<at::Tensor>& wholes,
                        bool tuple, const ForwardBatch& batch) {
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
    resume(*m);
    m->serving = false;
  }
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
  for (const auto& m : mediators_) {
    for (const auto& name : m->interpreter().assignedGlobals()) {
      const Value* v = m->env().find(name);
      if (!v) continue;
      const auto& snapshots = m->interpreter().savedSnapshots();
      const auto snapshot = snapshots.find(name);
      if ((*v)->saved) {
        out.saved[name] = toCpu(*v);
        out.unsaved.erase(name);
      } else if (snapshot != snapshots.end()) {
        out.saved[name] = toCpu(snapshot->second);
        out.unsaved.erase(name);
      } else if (!out.saved.count(name)) {
        out.unsaved.insert(name);
      }
    }
  }
  return out;
}

}  // namespace shardscope::trace
