// Interpreter, deferred values: a module call held back to run batched with alike calls
// (DeferredCalls, in the mediator) and the tensor ops a script applies to its result before it
// needs the values (`logits[-1].argmax()`). They stay deferred through names, lists and script
// functions; anything else that reads one computes it first (Interpreter::force).
#include "interpreter.h"

#include <set>

namespace shardscope::trace {

Value Interpreter::deferred(std::function<at::Tensor()> compute, bool op) {
  auto v = std::make_shared<Object>();
  v->type = Type::Deferred;
  v->compute = std::move(compute);
  if (deferred_.size() >= 64 && deferred_.size() == deferred_.capacity()) {
    std::erase_if(deferred_, [](const Held& h) {
      const Value x = h.value.lock();
      return !x || x->type != Type::Deferred;
    });
  }
  deferred_.push_back({v, op});
  return v;
}

namespace {
bool holdsDeferred(const Value& v, bool deep, int depth = 0) {
  if (v->type == Type::Deferred) return true;
  if (!deep || depth > 32) return false;  // deeper nesting (or a list in itself): resolved anyway
  for (const Value& item : v->items) {
    if (holdsDeferred(item, deep, depth + 1)) return true;
  }
  for (const auto& [k, x] : v->dict) {
    if (holdsDeferred(x, deep, depth + 1)) return true;
  }
  return false;
}
}  // namespace

void Interpreter::force(const Value& v, bool deep) {
  if (deferred_.empty() || !holdsDeferred(v, deep)) return;
  for (size_t i = 0; i < deferred_.size(); ++i) {  // resolving may hold more: index, not iterator
    if (!deferred_[i].op) continue;
    if (const Value x = deferred_[i].value.lock()) resolve(x);
  }
  if (deep)
    resolveDeep(v);
  else
    resolve(v);
  charged(v);
}

void Interpreter::resolveDeferred() {
  try {
    for (size_t i = 0; i < deferred_.size(); ++i) {
      if (const Value x = deferred_[i].value.lock()) resolve(x);
    }
  } catch (const ScriptError&) {
    throw;
  } catch (const std::exception& e) {  // at the block's last statement; the message names the call
    fail(e.what());
  }
  deferred_.clear();
}

void Interpreter::abandonDeferred(const std::string& why) {
  for (const Held& h : deferred_) {
    const Value x = h.value.lock();
    if (!x || x->type != Type::Deferred) continue;
    x->compute = [why]() -> at::Tensor { throw RuntimeFailure("never computed: " + why); };
  }
  deferred_.clear();
}

namespace {

// Whether `v` holds a tensor anywhere (such an argument could be edited before a deferred op runs).
bool holdsTensor(const Value& v) {
  if (v->type == Type::Tensor || v->type == Type::Deferred) return true;
  for (const Value& item : v->items) {
    if (holdsTensor(item)) return true;
  }
  return false;
}

bool holdsTensor(const CallArgs& args) {
  for (const Value& v : args.positional) {
    if (holdsTensor(v)) return true;
  }
  for (const auto& [k, v] : args.keywords) {
    if (holdsTensor(v)) return true;
  }
  return false;
}

// Runs `op` for a deferred value; a failure names the line that asked for it.
at::Tensor runDeferredOp(const std::function<at::Tensor()>& op, const std::string& what, int line) {
  try {
    return op();
  } catch (const RuntimeFailure& e) {
    throw RuntimeFailure(std::string(e.what()) + " (in " + what + " on line " +
                         std::to_string(line) + ", run when its value was first needed)");
  }
}

}  // namespace

Value Interpreter::deferredMethod(const Value& self, const std::string& name) {
  // Pure functions of the tensor: the same value whenever they run. In-place methods and those
  // returning several values or numbers compute the tensor first.
  static const std::set<std::string> later = {
      "argmax",  "argmin",     "softmax", "log_softmax", "sum",     "mean",      "std",
      "var",     "norm",       "abs",     "exp",         "log",     "sqrt",      "sigmoid",
      "tanh",    "relu",       "pow",     "cumsum",      "float",   "half",      "bfloat16",
      "double",  "long",       "int",     "bool",        "to",      "cpu",       "clone",
      "detach",  "contiguous", "view",    "reshape",     "permute", "transpose", "unsqueeze",
      "squeeze", "flatten",    "narrow"};
  if (!later.count(name)) return nullptr;
  const int line = at_.line;
  return builtin(name, [this, self, name, line](CallArgs& args) -> Value {
    if (holdsTensor(args)) {  // could be edited before it runs: now, on the computed tensor
      force(self);
      return tensorAttribute(*this, self, name)->builtin(args);
    }
    return deferred(
        [this, self, name, line, kept = args]() mutable {
          return runDeferredOp(
              [&] {
                resolve(self);
                const Value r = tensorAttribute(*this, self, name)->builtin(kept);
                if (r->type != Type::Tensor)
                  throw RuntimeFailure("." + name + "() did not return a tensor");
                return r->tensor;
              },
              "." + name + "()", line);
        },
        true);
  });
}

Value Interpreter::deferredIndex(const Value& self, const Value& index) {
  if (holdsTensor(index)) return nullptr;
  const int line = at_.line;
  return deferred(
      [self, index, line] {
        return runDeferredOp(
            [&] {
              resolve(self);
              return self->tensor.index(tensorIndices(index));
            },
            "a subscript", line);
      },
      true);
}

}  // namespace shardscope::trace
