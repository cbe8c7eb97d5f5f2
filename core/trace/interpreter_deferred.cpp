// Interpreter, deferred values: a module call held back to run batched with alike calls
// (DeferredCalls, in the mediator) and the tensor ops a script applies to its result before it
// needs the values (`logits[-1].argmax()`). They stay deferred through names, lists and script
// functions; anything else that reads one computes it first (Interpreter::force). Alike ops on
// the outputs of one batched call (the lens's 28 `[-1].argmax()`) run once on the stacked output.
#include "interpreter.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

#include "tensor_methods.h"

namespace shardscope::trace {

// What a deferred op does, kept so that alike ops on sibling values can run once, stacked.
struct Interpreter::DeferredOp {
  Value parent;
  bool subscript = false;
  Value index;         // subscript
  std::string method;  // method call
  CallArgs args;
  int line = 0;
  std::string signature;   // equal for ops that do the same thing
  bool stackable = false;  // can run on a stack of its inputs (see stackedArgs)
};

namespace {

// Whether `v` holds a tensor anywhere (such an argument could be edited before a deferred op runs).
bool holdsTensor(const Value& v) {
  return anyInside(
      v, [](const Value& x) { return x->type == Type::Tensor || x->type == Type::Deferred; });
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
  } catch (const c10::Error& e) {
    throw RuntimeFailure(std::string("torch: ") + e.what_without_backtrace() + " (in " + what +
                         " on line " + std::to_string(line) +
                         ", run when its value was first needed)");
  }
}

// Ops that act on each element alone: the same on a stack of inputs.
const std::set<std::string>& elementwise() {
  static const std::set<std::string> names = {
      "abs",  "exp",    "log",      "sqrt", "sigmoid", "tanh", "relu",  "float",
      "half", "double", "bfloat16", "long", "int",     "bool", "clone", "detach"};
  return names;
}
// Ops along one dimension given as `dim` (the first argument): on a stack, that dimension + 1.
const std::set<std::string>& alongDim() {
  static const std::set<std::string> names = {"argmax", "argmin", "softmax", "log_softmax",
                                              "sum",    "mean",   "cumsum"};
  return names;
}

// An index of ints, slices, None and Ellipsis (a view, or a copy for none of them).
bool basicIndex(const Value& index) {
  const auto basic = [](const Value& v) {
    return v->type == Type::Int || v->type == Type::Slice || v->type == Type::None ||
           v->type == Type::Ellipsis;
  };
  if (index->type != Type::Tuple) return basic(index);
  for (const Value& item : index->items) {
    if (!basic(item)) return false;
  }
  return true;
}

// The dim argument of an alongDim op: its first positional argument or `dim=`.
const Value* dimArgument(const CallArgs& args) {
  if (!args.positional.empty()) return &args.positional[0];
  return args.keyword("dim");
}

}  // namespace

Value Interpreter::held(std::function<at::Tensor()> compute, std::shared_ptr<const DeferredOp> op,
                        std::shared_ptr<StackedRow> row) {
  auto v = std::make_shared<Object>();
  v->type = Type::Deferred;
  // Reached after its block ended, or from another rank's block, it fails with the script's error:
  // its computation runs this interpreter's ops, on this rank.
  v->compute = [block = lifetime(), rank = std::this_thread::get_id(),
                compute = std::move(compute)] {
    requireBlock(block, rank, "a value computed lazily");
    return compute();
  };
  if (deferred_.size() >= 64 && deferred_.size() == deferred_.capacity()) {
    deferred_.erase(std::remove_if(deferred_.begin(), deferred_.end(),
                                   [](const Held& h) {
                                     const Value x = h.value.lock();
                                     return !x || (x->type != Type::Deferred &&
                                                   !h.row->stacked.defined());  // no use left
                                   }),
                    deferred_.end());
  }
  deferred_.push_back({v, std::move(op), std::move(row)});
  return v;
}

Value Interpreter::deferredCall(std::function<StackedRow()> compute) {
  auto row = std::make_shared<StackedRow>();
  return held(
      [compute = std::move(compute), row] {
        *row = compute();
        return row->value;
      },
      nullptr, row);
}

void Interpreter::force(const Value& v, bool deep) {
  if (deferred_.empty()) return;
  if (deep ? !holdsDeferred(v) : v->type != Type::Deferred) return;
  resolveOps();
  if (deep)
    resolveDeep(v);
  else
    resolve(v);
  charged(v);
}

// Every pending op. Alike ops on blocks of one stacked tensor (the outputs of one batched call,
// or of alike ops on them) are gathered and run once on the stack; each takes its block of the
// result, a view of it as the op alone would give.
void Interpreter::resolveOps() {
  std::unordered_map<const Object*, size_t> entry;  // a value's place in deferred_
  for (size_t i = 0; i < deferred_.size(); ++i) {
    if (const Value x = deferred_[i].value.lock()) entry[x.get()] = i;
  }
  using Key = std::pair<const void*, std::string>;  // the stack, the op
  std::map<Key, std::vector<size_t>> gathered;
  const auto rowOf = [&](const Value& v) -> StackedRow* {
    const auto it = entry.find(v.get());
    return it == entry.end() ? nullptr : deferred_[it->second].row.get();
  };
  const auto runGathered = [&](const Key& key) {
    const auto found = gathered.find(key);
    if (found == gathered.end()) return;
    const std::vector<size_t> ops = std::move(found->second);
    gathered.erase(found);
    const DeferredOp& op = *deferred_[ops.front()].op;
    at::Tensor stacked;
    if (ops.size() > 1) {
      try {
        stacked = runStacked(op, rowOf(op.parent)->stacked);
      } catch (const std::exception&) {
        // Not raised here: each op run alone below fails with the message of its own shapes.
      }
    }
    if (!stacked.defined()) {
      for (size_t j : ops) {
        if (const Value x = deferred_[j].value.lock()) resolve(x);
      }
      return;
    }
    for (size_t j : ops) {
      const Value x = deferred_[j].value.lock();
      if (!x || x->type != Type::Deferred) continue;
      const int64_t block = rowOf(deferred_[j].op->parent)->index;
      x->tensor = stacked.select(0, block);
      x->type = Type::Tensor;
      x->compute = nullptr;
      *deferred_[j].row = StackedRow{x->tensor, stacked, block};
    }
  };
  // By depth (an op on a call's output first, an op on such an op next), so that every alike op
  // of a depth is gathered before any op above it needs its value.
  std::vector<std::vector<size_t>> depths;
  std::unordered_map<const Object*, size_t> depthOf;
  for (size_t i = 0; i < deferred_.size(); ++i) {
    const Value x = deferred_[i].value.lock();
    if (!deferred_[i].op || !x || x->type != Type::Deferred) continue;
    const auto below = depthOf.find(deferred_[i].op->parent.get());
    const size_t d = below == depthOf.end() ? 0 : below->second + 1;
    depthOf[x.get()] = d;
    if (depths.size() <= d) depths.resize(d + 1);
    depths[d].push_back(i);
  }
  for (const std::vector<size_t>& ops : depths) {
    for (size_t i : ops) {
      const Value x = deferred_[i].value.lock();
      if (!x || x->type != Type::Deferred) continue;
      const DeferredOp& op = *deferred_[i].op;
      resolve(op.parent);  // a held call's group runs here; an op below ran at its depth
      const StackedRow* input = rowOf(op.parent);
      if (!op.stackable || !input || !input->stacked.defined()) {
        resolve(x);
        continue;
      }
      gathered[Key{input->stacked.unsafeGetTensorImpl(), op.signature}].push_back(i);
    }
    while (!gathered.empty()) runGathered(gathered.begin()->first);
  }
}

// `op` on a stack of its inputs (one leading dimension more): the subscript after a `:`, the
// dimension of an op along one moved by one.
at::Tensor Interpreter::runStacked(const DeferredOp& op, const at::Tensor& stacked) {
  if (op.subscript) {
    auto all = std::make_shared<Object>();
    all->type = Type::Slice;
    all->items = {none(), none(), none()};
    std::vector<Value> items{all};
    if (op.index->type == Type::Tuple)
      items.insert(items.end(), op.index->items.begin(), op.index->items.end());
    else
      items.push_back(op.index);
    return stacked.index(tensorIndices(tuple(items)));
  }
  CallArgs args = op.args;
  args.interpreter = this;  // the one computing it now (methods ask its memory budget)
  at::Tensor x = stacked;
  if (alongDim().count(op.method)) {
    // Stackable ops (held()) take no argument, a reduction over each block's elements (flattened
    // after the first dimension), or one int dim, moved by one. A negative dim counts from the end
    // either way, but one before a block's first dimension would reach across the blocks: refused
    // here, so each op runs alone and fails with its own shapes' message.
    if (args.positional.empty() && args.keywords.empty()) {
      x = stacked.flatten(1);
      args.positional.push_back(integer(1));
    } else {
      Value& dim = args.positional.empty() ? args.keywords.front().second : args.positional.front();
      if (dim->intValue < -(stacked.dim() - 1))
        throw RuntimeFailure("dim " + std::to_string(dim->intValue) + " is outside each block");
      if (dim->intValue >= 0) dim = integer(dim->intValue + 1);
    }
  }
  const Value r = tensorAttribute(*this, tensor(x), op.method)->builtin(args);
  if (r->type != Type::Tensor) throw RuntimeFailure("." + op.method + "() did not return a tensor");
  return r->tensor;
}

void Interpreter::resolveDeferred() {
  try {
    resolveOps();
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
  // The interpreter that calls the method (a later invoke's, say) holds the op, not this one:
  // `s = y.sum` in one invoke and `s()` in the next computes in the next.
  return builtin(name, [self, name, line](CallArgs& args) -> Value {
    SS_ASSERT(args.interpreter, "a deferred tensor's method was called without its interpreter");
    Interpreter& in = *args.interpreter;
    // An argument the method does not take fails here, at its line, not when the value is needed.
    if (const TensorMethod* m = tensorMethod(name))
      builtin_args::checkArguments(args, m->takes, "Tensor." + name);
    if (holdsTensor(args) || self->type != Type::Deferred) {  // now, on the computed tensor
      in.force(self);
      return tensorAttribute(in, self, name)->builtin(args);
    }
    auto op = std::make_shared<DeferredOp>();
    op->parent = self;
    op->method = name;
    op->args = args;
    op->line = line;
    op->signature = "." + name;
    for (const Value& v : args.positional) op->signature += " " + repr(v);
    for (const auto& [k, v] : args.keywords) op->signature += " " + k + "=" + repr(v);
    const Value* dim = dimArgument(args);
    const size_t given = args.positional.size() + args.keywords.size();
    op->stackable = (elementwise().count(name) && given == 0) ||
                    (alongDim().count(name) &&
                     (given == 0 || (given == 1 && dim && (*dim)->type == Type::Int)));
    return in.held(
        [&in, op] {
          return runDeferredOp(
              [&] {
                resolve(op->parent);
                CallArgs kept = op->args;
                kept.interpreter = &in;
                const Value r = tensorAttribute(in, op->parent, op->method)->builtin(kept);
                if (r->type != Type::Tensor)
                  throw RuntimeFailure("." + op->method + "() did not return a tensor");
                return r->tensor;
              },
              "." + op->method + "()", op->line);
        },
        op, std::make_shared<StackedRow>());
  });
}

Value Interpreter::deferredIndex(const Value& self, const Value& index) {
  if (holdsTensor(index)) return nullptr;
  auto op = std::make_shared<DeferredOp>();
  op->parent = self;
  op->subscript = true;
  op->index = index;
  op->line = at_.line;
  op->signature = "[" + repr(index) + "]";
  op->stackable = basicIndex(index);
  return held(
      [op] {
        return runDeferredOp(
            [&] {
              resolve(op->parent);
              return op->parent->tensor.index(tensorIndices(op->index));
            },
            "a subscript", op->line);
      },
      op, std::make_shared<StackedRow>());
}

}  // namespace shardscope::trace
