#include "mediator.h"

#include <algorithm>

#include "../engine/generation.h"
#include "../model/module_call.h"
#include "../model/tokenizer.h"
#include "../parallel/collective_board.h"
#include "../parallel/shard_spec.h"
#include "../runtime_switches.h"
#include "stage_reads.h"
#include "trace_device.h"

namespace shardscope::trace {
namespace {

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

std::string portName(const Module* m, PortRole role) {
  return m->path() + (role == PortRole::Input ? ".input" : ".output");
}

Mediator::Mediator(Interleaver& owner, int64_t invoke, int64_t firstRequest,
                   std::shared_ptr<const Program> program, const InvokeSpec& spec,
                   std::shared_ptr<Environment> scope, long long budget, const MemoryBudget& memory)
    : owner_(owner),
      invoke_(invoke),
      firstRequest_(firstRequest),
      requests_(spec.requests),
      body_(spec.body),
      env_(std::move(scope)),
      calls_([this](const Module& m, std::vector<CallArg> args, int64_t at) {
        std::vector<at::Tensor> out = runCall(m, std::move(args), at);
        if (out.size() != 1)
          throw Error("internal error in ShardScope: the row-wise call of " + m.path() +
                      " returned " + std::to_string(out.size()) + " tensors");
        return out.front();
      }) {
  batchCalls_ = RuntimeSwitches::current().batchCalls;
  interp_ = std::make_unique<Interpreter>(std::move(program), *this, env_, budget, memory);
  co_ = std::make_unique<Coroutine>([this] { run(); });
}

bool Mediator::viewsModelMemory(const at::Tensor& t) const {
  return owner_.viewsPortValue(t);
}

Value Mediator::moduleAttribute(Interpreter& in, const Value& module, const std::string& name) {
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
  // Bound to the block: a driver function called in it could keep them past its end.
  if (name == "whole")
    return boundToBlock(
        builtin("whole", [this, m](CallArgs& a) { return wholeParameter(m, str(a.required(0))); }),
        in.lifetime());
  if (const ModuleMethod* method = m->method(name)) {
    return boundToBlock(
        builtin(name,
                [this, m, method](CallArgs& a) {
                  const std::string callee = m->path() + "." + method->name;
                  const ForwardBatch batch = plain();
                  try {
                    return callResult(
                        method->call(ModuleCall(callee, callArgs(a, callee, owner_), batch)));
                  } catch (const ModuleCallError& e) {
                    throw RuntimeFailure(std::string(e.what()) + " (usage: " + m->path() + "." +
                                         method->usage + ")");
                  }
                }),
        in.lifetime());
  }
  if (!m->parent() && name == "tokenizer") return tokenizerObject(in);
  return moduleProxyOrFail(in, m, m->path() + "." + name, name);
}

void Mediator::setModuleAttribute(Interpreter& in, const Value& module, const std::string& name,
                                  const Value& v) {
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
    in.noteTensorWrite();
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

Value Mediator::moduleIndex(Interpreter& in, const Value& module, long long index) {
  const Module* m = resolve(in, module->str);
  if (index < 0) index += (long long)m->children().size();  // layers[-1]
  return moduleProxyOrFail(in, m, m->path() + "[" + std::to_string(index) + "]",
                           "[" + std::to_string(index) + "]");
}

std::optional<long long> Mediator::moduleLength(Interpreter& in, const Value& module) {
  const Module* m = resolve(in, module->str);
  const auto& children = m->children();
  if (children.empty() || children.front()->path() != m->path() + "[0]") return std::nullopt;
  return (long long)children.size();
}

Value Mediator::callModule(Interpreter& in, const Value& module, CallArgs& args) {
  const Module* m = resolve(in, module->str);
  if (!m->callableWithWhole()) {
    in.fail("calling " + m->path() + " (" + m->kind() +
            ") from a trace is not supported; callable modules: " + owner_.callableKinds());
  }
  std::vector<CallArg> tensors = callArgs(args, m->path(), owner_);
  if (batchCalls_ && DeferredCalls::holdable(*m, tensors)) {
    // A temporary tensor of the script (`norm(h)` passed on at once) needs no copy: the value
    // object is the call's alone, its tensor has two owners (the value and `tensors`) and its
    // storage backs no other tensor.
    std::vector<bool> unshared(tensors.size());
    for (size_t i = 0; i < tensors.size(); ++i) {
      const at::Tensor& t = tensors[i].tensor;
      unshared[i] = t.defined() && args.positional[i].use_count() == 1 && t.use_count() == 2 &&
                    t.has_storage() && t.storage().use_count() == 1 && !viewsModelMemory(t);
    }
    auto output = calls_.hold(*m, std::move(tensors), step, unshared);
    const std::string where = m->path() + "(...) on line " + std::to_string(in.location().line);
    return in.deferredCall([output, where] {
      try {
        return output();
      } catch (const std::exception& e) {
        throw RuntimeFailure(std::string(e.what()) + " (the call " + where +
                             ", run with alike calls when its value was first needed)");
      }
    });
  }
  return callResult(runCall(*m, std::move(tensors), step));
}

std::vector<at::Tensor> Mediator::runCall(const Module& m, std::vector<CallArg> args,
                                          int64_t atStep) {
  ForwardBatch batch = plain();
  batch.step = atStep;
  const auto call = [&] { return m.callWhole(ModuleCall(m.path(), std::move(args), batch)); };
  // With pipeline stages the stage holding the module runs it and shares the outputs.
  const int holder = holdingStage(owner_.rank(), m);
  return holder < 0 ? call() : computeOnStage(owner_.rank(), holder, call);
}

Value Mediator::tracerAttribute(Interpreter& in, const Value&, const std::string& name) {
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
    return boundToBlock(builtin("stop",
                                [this](CallArgs&) {
                                  stop = true;
                                  return none();
                                }),
                        in.lifetime());
  if (name == "invoke")
    in.fail("tracer.invoke(...) must be a `with` statement directly in the trace body");
  in.fail("the tracer has no attribute '" + name + "' (it has iter, result, stop, invoke)");
}

void Mediator::runWith(Interpreter& in, const Stmt& with, const Value& context) {
  if (context->type == Type::None) {  // e.g. torch.no_grad(): nothing to do
    in.run(with.body);
    return;
  }
  in.fail(
      "this `with` is not allowed inside a trace block (invokes belong directly in the trace "
      "body)");
}

void Mediator::iterateSteps(Interpreter& in, const Value& range,
                            const std::function<bool(long long)>& body) {
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

void Mediator::print(const std::string& line) {
  if (owner_.reporter()) owner_.print(line);
}

std::weak_ptr<const void> Mediator::blockLifetime() const {
  return owner_.lifetime();
}

std::string Mediator::undefinedName(const std::string& name) {
  return owner_.undefinedName(*this, name);
}

void Mediator::run() {
  setCurrentDevice(owner_.rank().device);
  try {
    try {
      interp_->run(body_);
    } catch (const RequestEnded&) {
      // the request ended during an unbounded iteration: nothing more to do
    }
    // What the block saved must be tensors when the driver reads it: held calls run here.
    interp_->resolveDeferred();
  } catch (...) {
    error = std::current_exception();
    interp_->abandonDeferred("the trace block failed before it needed this value");
  }
  wait = Wait::None;
}

void Mediator::suspend(Wait what) {
  wait = what;
  co_->yield();
  resumedFrom = what;
  wait = Wait::None;
}

void Mediator::awaitStepStart() {
  suspend(Wait::StepStart);
  if (ended) {
    ended = false;
    throw RequestEnded{};
  }
}

Value Mediator::readPort(Interpreter& in, const Module* m, PortRole role) {
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

const Module* Mediator::resolve(Interpreter& in, const std::string& path) {
  const Module* m = owner_.findModule(path);
  if (!m) in.fail("unknown module " + path);
  return m;
}

Value Mediator::moduleProxyOrFail(Interpreter& in, const Module* parent, const std::string& path,
                                  const std::string& name) {
  if (owner_.findModule(path)) return moduleProxy(path);
  std::vector<std::pair<size_t, std::string>> near;
  for (const Module* c : parent->children()) {
    const std::string tail =
        c->path().substr(parent->path().size() + (c->path()[parent->path().size()] == '.' ? 1 : 0));
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

Value Mediator::wholeParameter(const Module* m, const std::string& name) {
  const int holder = holdingStage(owner_.rank(), *m);
  if (holder < 0) return tensor(gatheredParameter(m, name));
  return tensor(computeOnStage(owner_.rank(), holder, [&] {
    return std::vector<at::Tensor>{gatheredParameter(m, name)};
  })[0]);
}

at::Tensor Mediator::gatheredParameter(const Module* m, const std::string& name) {
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

ForwardBatch Mediator::plain() const {
  return ForwardBatch{owner_.rank().group, at::Tensor(), {}, nullptr, step, {}, {}};
}

Value Mediator::tokenizerObject(Interpreter& in) {
  if (!owner_.tokenizer()) in.fail("this model has no tokenizer.json");
  return tokenizerValue(owner_.sharedTokenizer());
}

}  // namespace shardscope::trace
