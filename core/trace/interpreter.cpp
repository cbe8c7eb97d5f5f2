#include "interpreter.h"

#include "format_spec.h"
#include "trace_device.h"

#include <c10/util/Exception.h>
#include <algorithm>
#include <cctype>
#include <cstdint>

#include <climits>
#include <cmath>

namespace shardscope::trace {
namespace {

struct BreakSignal {};
struct ContinueSignal {};
struct ReturnSignal {
  Value value;
};

long long checkedInt(long long a, long long b, const std::string& op) {
  long long r = 0;
  bool overflow = false;
  if (op == "+")
    overflow = __builtin_add_overflow(a, b, &r);
  else if (op == "-")
    overflow = __builtin_sub_overflow(a, b, &r);
  else if (op == "*")
    overflow = __builtin_mul_overflow(a, b, &r);
  if (overflow)
    throw RuntimeFailure("integer overflow in " + std::to_string(a) + " " + op + " " +
                         std::to_string(b) + " (ints are 64-bit)");
  return r;
}

long long floorDiv(long long a, long long b) {
  if (b == 0) throw RuntimeFailure("integer division or modulo by zero");
  long long q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

long long normalizeIndex(long long i, size_t n) {
  const long long k = i < 0 ? i + (long long)n : i;
  if (k < 0 || k >= (long long)n)
    throw RuntimeFailure("index " + std::to_string(i) + " out of range for length " +
                         std::to_string(n));
  return k;
}

// Python slice semantics over a sequence of length n.
std::vector<long long> sliceIndices(const Value& s, size_t n) {
  const long long step = s->items[2]->type == Type::None ? 1 : asInt(s->items[2], "slice step");
  if (step == 0) throw RuntimeFailure("slice step cannot be zero");
  const long long len = (long long)n;
  const auto bound = [&](const Value& v, long long dflt) {
    if (v->type == Type::None) return dflt;
    long long i = asInt(v, "slice index");
    if (i < 0) i += len;
    return step > 0 ? std::clamp(i, 0LL, len) : std::clamp(i, -1LL, len - 1);
  };
  const long long start = bound(s->items[0], step > 0 ? 0 : len - 1);
  const long long stop = bound(s->items[1], step > 0 ? len : -1);
  std::vector<long long> out;
  for (long long i = start; step > 0 ? i < stop : i > stop; i += step) out.push_back(i);
  return out;
}

bool isNumber(const Value& v) {
  return v->type == Type::Int || v->type == Type::Float || v->type == Type::Bool;
}

// list.index / list.count (and tuple's): Python's semantics, `index(x[, start[, end]])`.
Value sequenceSearch(const Value& seq, const std::string& name) {
  return builtin(name, [seq, name](CallArgs& a) {
    const Value& x = a.required(0, "value");
    const auto& items = seq->items;
    if (name == "count") {
      return integer((long long)std::count_if(items.begin(), items.end(),
                                              [&](const Value& v) { return equal(v, x); }));
    }
    const long long n = (long long)items.size();
    const auto bound = [n](const Value* v, long long dflt) {
      if (!v) return dflt;
      long long i = asInt(*v, "index bound");
      if (i < 0) i += n;
      return std::clamp(i, 0LL, n);
    };
    const long long start = bound(a.get(1, "start"), 0), end = bound(a.get(2, "end"), n);
    for (long long i = start; i < end; ++i) {
      if (equal(items[size_t(i)], x)) return integer(i);
    }
    throw RuntimeFailure(repr(x) + " is not in " + typeName(seq->type));
  });
}

}  // namespace

Value* Environment::find(const std::string& name) {
  for (Environment* e = this; e; e = e->parent_.get()) {
    auto it = e->vars_.find(name);
    if (it != e->vars_.end()) return &it->second;
  }
  return nullptr;
}

int64_t asInt(const Value& v, const char* what) {
  if (v->type == Type::Int) return v->intValue;
  if (v->type == Type::Bool) return v->boolValue;
  if (v->type == Type::Tensor && v->tensor.numel() == 1 &&
      !at::isFloatingType(v->tensor.scalar_type())) {
    return v->tensor.item<int64_t>();
  }
  throw RuntimeFailure(std::string(what) + " must be an int, got " + typeName(v->type));
}

double asNumber(const Value& v, const char* what) {
  if (v->type == Type::Float) return v->floatValue;
  if (v->type == Type::Int) return double(v->intValue);
  if (v->type == Type::Bool) return v->boolValue;
  if (v->type == Type::Tensor && v->tensor.numel() == 1) return v->tensor.item<double>();
  throw RuntimeFailure(std::string(what) + " must be a number, got " + typeName(v->type));
}

Interpreter::Interpreter(std::shared_ptr<const Program> program, Host& host,
                         std::shared_ptr<Environment> globals, long long budget,
                         int64_t memoryBudget)
    : program_(std::move(program)),
      host_(host),
      globals_(std::move(globals)),
      env_(globals_),
      budget_(budget),
      memory_(memoryBudget) {}

void Interpreter::fail(const std::string& message) const {
  throw ScriptError(program_->file, at_, stmt_ ? stmt_->source : "", message);
}

void Interpreter::failInternal(const std::string& detail) const {
  fail(
      "internal error in ShardScope, not a mistake in the script (please report it with this "
      "script): " +
      detail);
}

int64_t Interpreter::heldBytes() const {
  return trace::heldBytes(*env_, builtinScope().get());
}

void Interpreter::requestMemory(int64_t bytes) {
  const std::string error = memory_.request(bytes, [this] { return heldBytes(); });
  if (!error.empty()) fail(error);
}

Value Interpreter::charged(Value v) {
  int64_t bytes = 64;  // the value object itself
  if (v->type == Type::Tensor && v->tensor.defined()) bytes += int64_t(v->tensor.nbytes());
  bytes += int64_t(v->str.size() + (v->items.size() + v->dict.size() * 2) * sizeof(Value));
  const std::string error = memory_.charge(bytes, [this] { return heldBytes(); });
  if (!error.empty()) fail(error);
  return v;
}

void Interpreter::tick() {
  if (++steps_ > budget_) {
    fail("instruction budget of " + std::to_string(budget_) +
         " evaluation steps exhausted (a runaway loop?); raise it with --budget if the work is "
         "real");
  }
}

void Interpreter::run(const Block& block) {
  runBody(block);
}

void Interpreter::runBody(const Block& body) {
  for (const auto& s : body) exec(*s);
}

void Interpreter::exec(const Stmt& s) {
  const Stmt* outer = stmt_;
  stmt_ = &s;
  at_ = s.at;
  tick();
  try {
    switch (s.kind) {
      case StmtKind::Expr:
        eval(*s.value);
        break;
      case StmtKind::Assign: {
        if (s.targets.size() == 1 && s.targets[0]->kind == ExprKind::Subscript) {
          // The target first: `port[idx] = value` waits for the port before evaluating the value,
          // so a value made by an earlier invoke at the same port (patching) is already there.
          Value obj = eval(*s.targets[0]->a);
          Value index = eval(*s.targets[0]->b);
          setItem(obj, index, eval(*s.value));
          break;
        }
        Value v = eval(*s.value);
        for (const auto& t : s.targets) assign(*t, v);
        break;
      }
      case StmtKind::AugAssign: {
        const Expr& t = *s.targets[0];
        Value current = eval(t);
        Value rhs = eval(*s.value);
        if (current->type == Type::Tensor) {
          noteTensorWrite();
          // In place, as torch does: edits through a port view are writes.
          at::Tensor r = rhs->type == Type::Tensor ? rhs->tensor : toTensor(rhs, &current->tensor);
          if (s.op == "+")
            current->tensor.add_(r);
          else if (s.op == "-")
            current->tensor.sub_(r);
          else if (s.op == "*")
            current->tensor.mul_(r);
          else if (s.op == "/")
            current->tensor.div_(r);
          else
            assign(t, binary(s.op, current, rhs));
        } else if (current->type == Type::List && s.op == "+") {
          const std::vector<Value> added = rhs->items;  // a copy: `x += x` reads what it grows
          requestMemory(int64_t((current->items.size() + added.size()) * sizeof(Value)));
          current->items.insert(current->items.end(), added.begin(), added.end());
        } else {
          assign(t, binary(s.op, current, rhs));
        }
        break;
      }
      case StmtKind::If:
        if (truthy(eval(*s.value)))
          runBody(s.body);
        else
          runBody(s.orElse);
        break;
      case StmtKind::While:
        while (truthy(eval(*s.value))) {
          try {
            runBody(s.body);
          } catch (const BreakSignal&) {
            break;
          } catch (const ContinueSignal&) {
          }
          at_ = s.at;
        }
        break;
      case StmtKind::For: {
        Value iterable = eval(*s.value);
        const auto bodyOnce = [&](const Value& item) {
          assign(*s.targets[0], item);
          try {
            runBody(s.body);
          } catch (const ContinueSignal&) {
          }
          return true;
        };
        try {
          if (iterable->type == Type::IterRange) {
            host_.iterateSteps(*this, iterable,
                               [&](long long step) { return bodyOnce(integer(step)); });
          } else if (iterable->type == Type::Range) {
            for (long long i = iterable->rangeStart;
                 iterable->rangeStep > 0 ? i < iterable->rangeStop : i > iterable->rangeStop;
                 i += iterable->rangeStep) {
              bodyOnce(integer(i));
            }
          } else if (iterable->type == Type::Tuple || iterable->type == Type::List ||
                     iterable->type == Type::Size) {
            const std::vector<Value> items = iterable->items;  // the body may mutate a list
            for (const auto& item : items) bodyOnce(item);
          } else if (iterable->type == Type::Dict) {
            const auto entries = iterable->dict;
            for (const auto& kv : entries) bodyOnce(kv.first);
          } else if (iterable->type == Type::Str) {
            for (char c : iterable->str) bodyOnce(string(std::string(1, c)));
          } else if (iterable->type == Type::Tensor) {
            for (int64_t i = 0; i < iterable->tensor.size(0); ++i)
              bodyOnce(tensor(iterable->tensor[i]));
          } else {
            fail(std::string("cannot iterate over ") + typeName(iterable->type));
          }
        } catch (const BreakSignal&) {
        }
        break;
      }
      case StmtKind::Def: {
        env_->set(s.op, makeFunction(s.op, s.params, s.body, nullptr));
        if (env_ == globals_) assigned_.insert(s.op);
        break;
      }
      case StmtKind::Return:
        throw ReturnSignal{s.value ? eval(*s.value) : none()};
      case StmtKind::Pass:
        break;
      case StmtKind::Break:
        throw BreakSignal{};
      case StmtKind::Continue:
        throw ContinueSignal{};
      case StmtKind::With:
        host_.runWith(*this, s, eval(*s.value));
        break;
      case StmtKind::Assert:
        if (!truthy(eval(*s.value)))
          fail("assertion failed" + (s.message ? ": " + str(eval(*s.message)) : std::string()));
        break;
      case StmtKind::Import: {
        static const std::set<std::string> modules = {
            "torch", "nnsight", "nnsight.modeling.vllm", "shardscope", "vllm", "vllm.inputs"};
        if (!modules.count(s.op)) {
          fail("cannot import '" + s.op +
               "': trace scripts may import torch, nnsight, nnsight.modeling.vllm "
               "(VLLM), from nnsight LanguageModel, and from vllm or vllm.inputs TokensPrompt");
        }
        const bool from = !s.targets.empty();
        if (!from) {
          const std::string root = s.op.substr(0, s.op.find('.'));
          Value* ns = globals_->find(root);
          if (!ns) fail("module '" + root + "' is not available");
          env_->set(s.names.empty() ? root : s.names[0], *ns);
          break;
        }
        for (const auto& n : s.names) {
          static const std::set<std::string> names = {"VLLM", "LanguageModel", "TokensPrompt"};
          if (!names.count(n))
            fail("cannot import '" + n + "' from " + s.op +
                 ": available names are VLLM, LanguageModel and TokensPrompt");
          env_->set(n, *globals_->find(n));
        }
        break;
      }
    }
  } catch (const ScriptError&) {
    throw;
  } catch (const RuntimeFailure& e) {
    fail(e.what());
  } catch (const c10::Error& e) {
    fail(std::string("torch: ") + e.what_without_backtrace());
  } catch (const Error& e) {
    fail(e.what());
  } catch (const std::bad_alloc&) {
    fail(
        "out of memory while running this statement; lower the block's memory budget "
        "(--memory-budget-mb) so it stops earlier, or make less");
  } catch (const std::length_error& e) {
    fail(std::string("a value would be too large: ") + e.what());
  } catch (const std::logic_error& e) {
    // Scripts raise RuntimeFailure/ScriptError; a logic_error (SS_ASSERT, .at(), ...) is our bug.
    failInternal(e.what());
  }
  stmt_ = outer;
}

void Interpreter::assign(const Expr& target, const Value& v) {
  switch (target.kind) {
    case ExprKind::Name:
      env_->set(target.text, v);
      if (env_ == globals_) assigned_.insert(target.text);
      return;
    case ExprKind::Tuple:
    case ExprKind::List: {
      std::vector<Value> items;
      if (v->type == Type::Tuple || v->type == Type::List || v->type == Type::Size) {
        items = v->items;
      } else if (v->type == Type::Tensor) {
        for (int64_t i = 0; i < v->tensor.size(0); ++i) items.push_back(tensor(v->tensor[i]));
      } else {
        fail(std::string("cannot unpack ") + typeName(v->type));
      }
      if (items.size() != target.items.size()) {
        fail("cannot unpack " + std::to_string(items.size()) + " values into " +
             std::to_string(target.items.size()) + " names");
      }
      for (size_t i = 0; i < items.size(); ++i) assign(*target.items[i], items[i]);
      return;
    }
    case ExprKind::Subscript:
      setItem(eval(*target.a), eval(*target.b), v);
      return;
    case ExprKind::Attribute: {
      Value obj = eval(*target.a);
      if (obj->type == Type::Module) return host_.setModuleAttribute(*this, obj, target.text, v);
      fail(std::string("cannot set attribute '") + target.text + "' of " + typeName(obj->type) +
           " (only module ports such as .output can be assigned)");
    }
    default:
      fail("cannot assign to this expression");
  }
}

Value Interpreter::eval(const Expr& e) {
  tick();
  switch (e.kind) {
    case ExprKind::Name: {
      Value* v = env_->find(e.text);
      if (!v) {
        at_ = e.at;
        const std::string why = host_.undefinedName(e.text);
        fail(why.empty() ? "name '" + e.text + "' is not defined" : why);
      }
      if ((*v)->type == Type::Unsaved) {
        at_ = e.at;
        fail("'" + e.text +
             "' was assigned inside the trace but not saved, so it is not visible after it; "
             "add .save() where it is assigned");
      }
      return *v;
    }
    case ExprKind::Int:
      return integer(e.intValue);
    case ExprKind::Float:
      return floating(e.floatValue);
    case ExprKind::Str:
      return string(e.text);
    case ExprKind::Bool:
      return boolean(e.intValue != 0);
    case ExprKind::None:
      return none();
    case ExprKind::Ellipsis: {
      static const Value v = [] {
        auto o = std::make_shared<Object>();
        o->type = Type::Ellipsis;
        return o;
      }();
      return v;
    }
    case ExprKind::FString: {
      std::string out = e.names[0];
      for (size_t i = 0; i < e.items.size(); ++i) {
        out += formatValue(eval(*e.items[i]), e.formats[i])->str;
        out += e.names[i + 1];
      }
      return charged(string(out));
    }
    case ExprKind::Tuple:
    case ExprKind::List: {
      std::vector<Value> items;
      for (const auto& i : e.items) items.push_back(eval(*i));
      return e.kind == ExprKind::Tuple ? tuple(std::move(items)) : list(std::move(items));
    }
    case ExprKind::Dict: {
      auto d = std::make_shared<Object>();
      d->type = Type::Dict;
      for (size_t i = 0; i < e.items.size(); ++i) setItem(d, eval(*e.items[i]), eval(*e.values[i]));
      return d;
    }
    case ExprKind::Attribute:
      return getAttr(eval(*e.a), e.text);
    case ExprKind::Subscript:
      return getItem(eval(*e.a), eval(*e.b));
    case ExprKind::Slice: {
      auto s = std::make_shared<Object>();
      s->type = Type::Slice;
      s->items = {e.a ? eval(*e.a) : none(), e.b ? eval(*e.b) : none(), e.c ? eval(*e.c) : none()};
      return s;
    }
    case ExprKind::Call:
      return evalCall(e);
    case ExprKind::Unary: {
      Value v = eval(*e.a);
      if (e.text == "not") return boolean(!truthy(v));
      if (v->type == Type::Tensor) {
        if (e.text == "-") return tensor(-v->tensor);
        if (e.text == "~") return tensor(~v->tensor);
        return v;
      }
      if (e.text == "-")
        return v->type == Type::Float ? floating(-v->floatValue)
                                      : integer(checkedInt(0, asInt(v, "operand of -"), "-"));
      if (e.text == "~") return integer(~asInt(v, "operand of ~"));
      if (!isNumber(v)) fail(std::string("bad operand type for unary +: ") + typeName(v->type));
      return v;
    }
    case ExprKind::Binary:
      return binary(e.text, eval(*e.a), eval(*e.b));
    case ExprKind::Compare: {
      Value left = eval(*e.items[0]);
      Value result = boolean(true);
      for (size_t i = 0; i < e.names.size(); ++i) {
        Value right = eval(*e.items[i + 1]);
        result = compare(e.names[i], left, right);
        if (result->type != Type::Tensor && !truthy(result)) return result;
        left = right;
      }
      return result;
    }
    case ExprKind::And: {
      Value a = eval(*e.a);
      return truthy(a) ? eval(*e.b) : a;
    }
    case ExprKind::Or: {
      Value a = eval(*e.a);
      return truthy(a) ? a : eval(*e.b);
    }
    case ExprKind::IfElse:
      return truthy(eval(*e.b)) ? eval(*e.a) : eval(*e.c);
    case ExprKind::Lambda:
      return makeFunction("<lambda>", e.params, {}, e.a);
  }
  fail("unsupported expression");
}

Value Interpreter::makeFunction(const std::string& name, const std::vector<Param>& params,
                                const Block& body, ExprPtr lambdaBody) {
  auto f = std::make_shared<FunctionDef>();
  f->name = name;
  f->params = params;
  for (const auto& p : params)
    f->defaults.push_back(p.defaultValue ? eval(*p.defaultValue) : nullptr);
  f->body = body;
  f->lambdaBody = std::move(lambdaBody);
  f->closure = env_;  // closures see the scope they were made in
  auto v = std::make_shared<Object>();
  v->type = Type::Function;
  v->function = f;
  return v;
}

bool Interpreter::holdsModelMemory(const Value& v) const {
  if (v->type == Type::Tensor) return host_.viewsModelMemory(v->tensor);
  for (const auto& item : v->items) {
    if (holdsModelMemory(item)) return true;
  }
  for (const auto& [k, x] : v->dict) {
    if (holdsModelMemory(x)) return true;
  }
  return false;
}

// TRACE section 6: `.save()` returns its receiver and marks it; a value that views model memory
// is copied at once (later kernels reuse that memory). A bare `x.save()` marks the name `x`.
Value Interpreter::save(const Expr& receiverExpr) {
  Value receiver = eval(receiverExpr);
  if (receiver->type == Type::Module)
    fail("a module cannot be saved; save one of its ports (.output, .input)");
  Value saved;
  switch (receiver->type) {
    case Type::Tensor:
    case Type::List:
    case Type::Tuple:
    case Type::Dict:
      saved = holdsModelMemory(receiver) ? snapshot(receiver) : receiver;
      break;
    default:  // immutable values may be shared objects (None, True): mark a copy
      saved = std::make_shared<Object>(*receiver);
      break;
  }
  saved->saved = true;
  if (receiverExpr.kind == ExprKind::Name && saved != receiver && env_ == globals_)
    savedSnapshots_[receiverExpr.text] = saved;
  return saved;
}

Value Interpreter::evalCall(const Expr& e) {
  // `x.save()` is handled here so that saving works on every kind of value.
  if (e.a->kind == ExprKind::Attribute && e.a->text == "save" && e.items.empty()) {
    return save(*e.a->a);
  }
  Value fn = eval(*e.a);
  CallArgs args;
  args.at = e.at;
  for (const auto& a : e.items) args.positional.push_back(eval(*a));
  for (size_t i = 0; i < e.names.size(); ++i)
    args.keywords.emplace_back(e.names[i], eval(*e.values[i]));
  return call(fn, args);
}

Value Interpreter::call(const Value& fn, CallArgs& args) {
  switch (fn->type) {
    case Type::Builtin:
      args.callee = fn->str;
      return charged(fn->builtin(args));
    case Type::Function:
      return callFunction(*fn->function, args);
    case Type::Module:
      return charged(host_.callModule(*this, fn, args));
    default:
      fail(std::string("'") + typeName(fn->type) + "' object is not callable");
  }
}

Value Interpreter::callFunction(const FunctionDef& f, CallArgs& args) {
  if (++depth_ > 200) {
    --depth_;
    fail("maximum recursion depth (200) exceeded in " + f.name);
  }
  auto local = std::make_shared<Environment>(f.closure);
  if (args.positional.size() > f.params.size()) {
    fail(f.name + "() takes " + std::to_string(f.params.size()) + " arguments but " +
         std::to_string(args.positional.size()) + " were given");
  }
  for (size_t i = 0; i < f.params.size(); ++i) {
    const Value* v = args.get(i, f.params[i].name);
    if (v)
      local->set(f.params[i].name, *v);
    else if (f.defaults[i])
      local->set(f.params[i].name, f.defaults[i]);
    else
      fail(f.name + "() missing required argument '" + f.params[i].name + "'");
  }
  for (const auto& [k, v] : args.keywords) {
    bool known = false;
    for (const auto& p : f.params) known |= p.name == k;
    if (!known) fail(f.name + "() got an unexpected keyword argument '" + k + "'");
  }
  std::swap(env_, local);
  const Stmt* callerStmt = stmt_;
  const SourceLocation callerAt = at_;
  Value result = none();
  try {
    if (f.lambdaBody) {
      result = eval(*f.lambdaBody);
    } else {
      runBody(f.body);
    }
  } catch (const ReturnSignal& r) {
    result = r.value;
  } catch (...) {
    std::swap(env_, local);
    --depth_;
    throw;
  }
  std::swap(env_, local);
  stmt_ = callerStmt;
  at_ = callerAt;
  --depth_;
  return result;
}

Value Interpreter::compare(const std::string& op, const Value& a, const Value& b) {
  if (op == "is") return boolean(a == b || (a->type == Type::None && b->type == Type::None));
  if (op == "is not") return boolean(!(a == b || (a->type == Type::None && b->type == Type::None)));
  if (op == "in" || op == "not in") {
    bool found = false;
    if (b->type == Type::Str) {
      if (a->type != Type::Str) fail("'in <string>' requires a string on the left");
      found = b->str.find(a->str) != std::string::npos;
    } else if (b->type == Type::Dict) {
      for (const auto& kv : b->dict) found |= equal(kv.first, a);
    } else if (b->type == Type::Tuple || b->type == Type::List || b->type == Type::Size) {
      for (const auto& i : b->items) found |= equal(i, a);
    } else if (b->type == Type::Range) {
      const long long x = asInt(a, "value");
      found = b->rangeStep > 0 ? (x >= b->rangeStart && x < b->rangeStop &&
                                  (x - b->rangeStart) % b->rangeStep == 0)
                               : (x <= b->rangeStart && x > b->rangeStop &&
                                  (b->rangeStart - x) % -b->rangeStep == 0);
    } else {
      fail(std::string("argument of type '") + typeName(b->type) + "' is not iterable");
    }
    return boolean(op == "in" ? found : !found);
  }
  if (a->type == Type::Tensor || b->type == Type::Tensor) {
    const at::Tensor& like = a->type == Type::Tensor ? a->tensor : b->tensor;
    at::Tensor x = a->type == Type::Tensor ? a->tensor : toTensor(a, &like);
    at::Tensor y = b->type == Type::Tensor ? b->tensor : toTensor(b, &like);
    if (op == "==") return tensor(x == y);
    if (op == "!=") return tensor(x != y);
    if (op == "<") return tensor(x < y);
    if (op == "<=") return tensor(x <= y);
    if (op == ">") return tensor(x > y);
    return tensor(x >= y);
  }
  if (op == "==") return boolean(equal(a, b));
  if (op == "!=") return boolean(!equal(a, b));
  int c = 0;
  if (isNumber(a) && isNumber(b)) {
    const double x = asNumber(a, "operand"), y = asNumber(b, "operand");
    c = x < y ? -1 : x > y ? 1 : 0;
  } else if (a->type == Type::Str && b->type == Type::Str) {
    c = a->str.compare(b->str);
  } else if ((a->type == Type::Tuple || a->type == Type::List) && a->type == b->type) {
    size_t i = 0;
    while (i < a->items.size() && i < b->items.size() && equal(a->items[i], b->items[i])) ++i;
    if (i < a->items.size() && i < b->items.size()) return compare(op, a->items[i], b->items[i]);
    c = a->items.size() < b->items.size() ? -1 : a->items.size() > b->items.size() ? 1 : 0;
  } else {
    fail("'" + op + "' not supported between " + typeName(a->type) + " and " + typeName(b->type));
  }
  if (op == "<") return boolean(c < 0);
  if (op == "<=") return boolean(c <= 0);
  if (op == ">") return boolean(c > 0);
  return boolean(c >= 0);
}

Value Interpreter::binary(const std::string& op, const Value& a, const Value& b) {
  return charged(arithmetic(op, a, b));
}

Value Interpreter::arithmetic(const std::string& op, const Value& a, const Value& b) {
  if (a->type == Type::Tensor || b->type == Type::Tensor) {
    const at::Tensor& like = a->type == Type::Tensor ? a->tensor : b->tensor;
    at::Tensor x = a->type == Type::Tensor ? a->tensor : toTensor(a, &like);
    at::Tensor y = b->type == Type::Tensor ? b->tensor : toTensor(b, &like);
    if (op == "+") return tensor(x + y);
    if (op == "-") return tensor(x - y);
    if (op == "*") return tensor(x * y);
    if (op == "/") return tensor(at::div(x, y));
    if (op == "//") return tensor(at::floor_divide(x, y));
    if (op == "%") return tensor(at::remainder(x, y));
    if (op == "**") return tensor(at::pow(x, y));
    if (op == "@") return tensor(at::matmul(x, y));
    if (op == "&") return tensor(x & y);
    if (op == "|") return tensor(x | y);
    if (op == "^") return tensor(x ^ y);
    fail("operator " + op + " is not supported on tensors");
  }
  if (isNumber(a) && isNumber(b)) {
    const bool ints = a->type != Type::Float && b->type != Type::Float;
    if (ints) {
      const long long x = asInt(a, "operand"), y = asInt(b, "operand");
      if (op == "+" || op == "-" || op == "*") return integer(checkedInt(x, y, op));
      if (op == "//") return integer(floorDiv(x, y));
      if (op == "%") {
        if (y == 0) fail("integer division or modulo by zero");
        return integer(x - floorDiv(x, y) * y);
      }
      if (op == "/") {
        if (y == 0) fail("division by zero");
        return floating(double(x) / double(y));
      }
      if (op == "**") {
        if (y < 0) return floating(std::pow(double(x), double(y)));
        long long r = 1, base = x;  // by squaring: 1 ** 10**18 takes 60 steps, not 10**18
        for (long long e = y; e > 0; e >>= 1) {
          if (e & 1) r = checkedInt(r, base, "*");
          if (e > 1) base = checkedInt(base, base, "*");
        }
        return integer(r);
      }
      if (op == "&") return integer(x & y);
      if (op == "|") return integer(x | y);
      if (op == "^") return integer(x ^ y);
      if (op == "<<" || op == ">>") {
        if (y < 0) fail("negative shift count");
        if (op == ">>") return integer(y >= 63 ? (x < 0 ? -1 : 0) : x >> y);
        if (x != 0 && (y >= 63 || (x > 0 ? x > (LLONG_MAX >> y) : x < (LLONG_MIN >> y))))
          fail("integer overflow in " + std::to_string(x) + " << " + std::to_string(y) +
               " (ints are 64-bit)");
        return integer(x == 0 ? 0 : (long long)((unsigned long long)x << y));
      }
    }
    const double x = asNumber(a, "operand"), y = asNumber(b, "operand");
    if (op == "+") return floating(x + y);
    if (op == "-") return floating(x - y);
    if (op == "*") return floating(x * y);
    if (op == "/") {
      if (y == 0) fail("float division by zero");
      return floating(x / y);
    }
    if (op == "//") return floating(std::floor(x / y));
    if (op == "%") return floating(x - std::floor(x / y) * y);
    if (op == "**") return floating(std::pow(x, y));
  }
  if (op == "+" && a->type == Type::Str && b->type == Type::Str) {
    requestMemory(int64_t(a->str.size() + b->str.size()));
    return string(a->str + b->str);
  }
  if (op == "+" && (a->type == Type::List || a->type == Type::Tuple) && a->type == b->type) {
    requestMemory(int64_t((a->items.size() + b->items.size()) * sizeof(Value)));
    std::vector<Value> items = a->items;
    items.insert(items.end(), b->items.begin(), b->items.end());
    return a->type == Type::List ? list(items) : tuple(items);
  }
  if (op == "*" && (a->type == Type::Str || a->type == Type::List || a->type == Type::Tuple) &&
      b->type == Type::Int) {
    const long long times = std::max(0LL, b->intValue);
    const size_t length = a->type == Type::Str ? a->str.size() : a->items.size();
    const size_t unit = a->type == Type::Str ? 1 : sizeof(Value);
    long long bytes = 0;
    if (__builtin_mul_overflow((long long)(length * unit), times, &bytes))
      fail("a sequence of " + std::to_string(length) + " repeated " + std::to_string(times) +
           " times would be too large");
    requestMemory(bytes);
    if (a->type == Type::Str) {
      std::string s;
      s.reserve(size_t(bytes));
      for (long long i = 0; i < times && length; ++i) s += a->str;
      return string(s);
    }
    std::vector<Value> items;
    items.reserve(size_t(bytes) / sizeof(Value));
    for (long long i = 0; i < times && length; ++i)
      items.insert(items.end(), a->items.begin(), a->items.end());
    return a->type == Type::List ? list(items) : tuple(items);
  }
  if (op == "%" && a->type == Type::Str)
    fail("'%' string formatting is not supported; use an f-string");
  fail("unsupported operand types for " + op + ": " + typeName(a->type) + " and " +
       typeName(b->type));
}

Value Interpreter::getAttr(const Value& obj, const std::string& name) {
  switch (obj->type) {
    case Type::Module:
      return host_.moduleAttribute(*this, obj, name);
    case Type::Tracer:
      return host_.tracerAttribute(*this, obj, name);
    case Type::Tensor:
      return tensorAttribute(*this, obj, name);
    case Type::List:
      if (name == "append")
        return builtin("append", [obj](CallArgs& a) {
          obj->items.push_back(a.required(0));
          return none();
        });
      if (name == "extend") {
        return builtin("extend", [obj](CallArgs& a) {
          const std::vector<Value> added = a.required(0)->items;  // `x.extend(x)` is safe
          obj->items.insert(obj->items.end(), added.begin(), added.end());
          return none();
        });
      }
      if (name == "index" || name == "count") return sequenceSearch(obj, name);
      if (name == "pop") {
        return builtin("pop", [obj](CallArgs& a) {
          if (obj->items.empty()) throw RuntimeFailure("pop from empty list");
          const long long i = a.positional.empty() ? -1 : asInt(a.positional[0], "index");
          const long long k = normalizeIndex(i, obj->items.size());
          Value v = obj->items[k];
          obj->items.erase(obj->items.begin() + k);
          return v;
        });
      }
      break;
    case Type::Tuple:
      if (name == "index" || name == "count") return sequenceSearch(obj, name);
      break;
    case Type::Dict:
      if (name == "keys" || name == "values" || name == "items") {
        return builtin(name, [obj, name](CallArgs&) {
          std::vector<Value> out;
          for (const auto& [k, v] : obj->dict)
            out.push_back(name == "keys" ? k : name == "values" ? v : tuple({k, v}));
          return list(out);
        });
      }
      if (name == "get") {
        return builtin("get", [obj](CallArgs& a) {
          for (const auto& [k, v] : obj->dict) {
            if (equal(k, a.required(0))) return v;
          }
          return a.positional.size() > 1 ? a.positional[1] : none();
        });
      }
      break;
    case Type::Str:
      if (name == "join") {
        return builtin("join", [obj](CallArgs& a) {
          std::string s;
          const auto& items = a.required(0)->items;
          for (size_t i = 0; i < items.size(); ++i) s += (i ? obj->str : "") + str(items[i]);
          return string(s);
        });
      }
      if (name == "upper" || name == "lower" || name == "strip") {
        return builtin(name, [obj, name](CallArgs&) {
          std::string s = obj->str;
          if (name == "strip") {
            const auto b = s.find_first_not_of(" \t\n\r"), e = s.find_last_not_of(" \t\n\r");
            return string(b == std::string::npos ? "" : s.substr(b, e - b + 1));
          }
          for (auto& c : s) c = char(name == "upper" ? std::toupper(c) : std::tolower(c));
          return string(s);
        });
      }
      if (name == "startswith" || name == "endswith") {
        return builtin(name, [obj, name](CallArgs& a) {
          const std::string& p = a.required(0)->str;
          const std::string& s = obj->str;
          return boolean(s.size() >= p.size() &&
                         (name == "startswith" ? s.compare(0, p.size(), p) == 0
                                               : s.compare(s.size() - p.size(), p.size(), p) == 0));
        });
      }
      if (name == "replace") {
        return builtin("replace", [obj](CallArgs& a) {
          std::string s = obj->str;
          const std::string from = a.required(0)->str, to = a.required(1)->str;
          if (from.empty()) return string(s);
          for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size()))
            s.replace(p, from.size(), to);
          return string(s);
        });
      }
      break;
    default:
      break;
  }
  if (obj->type == Type::ResultObject || obj->type == Type::Namespace) {
    auto it = obj->attributes.find(name);
    if (it != obj->attributes.end()) return it->second;
    std::string known;
    for (const auto& [k, v] : obj->attributes) known += (known.empty() ? "" : ", ") + k;
    fail("'" + obj->str + "' has no attribute '" + name + "' (it has: " + known + ")");
  }
  fail(std::string("'") + typeName(obj->type) + "' object has no attribute '" + name + "'");
}

Value Interpreter::getItem(const Value& obj, const Value& index) {
  switch (obj->type) {
    case Type::Tuple:
    case Type::List:
    case Type::Size:
    case Type::Str: {
      const size_t n = obj->type == Type::Str ? obj->str.size() : obj->items.size();
      if (index->type == Type::Slice) {
        const auto idx = sliceIndices(index, n);
        if (obj->type == Type::Str) {
          std::string s;
          for (long long i : idx) s += obj->str[i];
          return string(s);
        }
        std::vector<Value> items;
        for (long long i : idx) items.push_back(obj->items[i]);
        if (obj->type == Type::Size) {
          auto v = std::make_shared<Object>(*obj);
          v->items = items;
          return v;
        }
        return obj->type == Type::List ? list(items) : tuple(items);
      }
      const long long k = normalizeIndex(asInt(index, "index"), n);
      return obj->type == Type::Str ? string(std::string(1, obj->str[k])) : obj->items[k];
    }
    case Type::Dict:
      for (const auto& [k, v] : obj->dict) {
        if (equal(k, index)) return v;
      }
      fail("key " + repr(index) + " not found");
    case Type::Tensor:
      return tensor(obj->tensor.index(tensorIndices(index)));
    case Type::Module:
      return host_.moduleIndex(*this, obj, asInt(index, "module index"));
    case Type::IterRange: {
      auto r = std::make_shared<Object>(*obj);
      if (index->type == Type::Slice) {
        if (index->items[2]->type != Type::None && asInt(index->items[2], "step") != 1)
          fail("tracer.iter does not take a step");
        r->rangeStart =
            index->items[0]->type == Type::None ? 0 : asInt(index->items[0], "first step");
        r->unbounded = index->items[1]->type == Type::None;
        r->rangeStop = r->unbounded ? -1 : asInt(index->items[1], "last step");
      } else {
        r->rangeStart = asInt(index, "step");
        r->rangeStop = r->rangeStart + 1;
      }
      if (r->rangeStart < 0 || (!r->unbounded && r->rangeStop < r->rangeStart))
        fail("tracer.iter takes steps >= 0");
      r->str = "range";
      return r;
    }
    case Type::Range: {
      const long long len = std::max(
          0LL, (obj->rangeStop - obj->rangeStart + obj->rangeStep - (obj->rangeStep > 0 ? 1 : -1)) /
                   obj->rangeStep);
      return integer(obj->rangeStart +
                     normalizeIndex(asInt(index, "index"), size_t(len)) * obj->rangeStep);
    }
    default:
      fail(std::string("'") + typeName(obj->type) + "' object is not subscriptable");
  }
}

void Interpreter::setItem(const Value& obj, const Value& index, const Value& v) {
  switch (obj->type) {
    case Type::List:
      obj->items[normalizeIndex(asInt(index, "index"), obj->items.size())] = v;
      return;
    case Type::Dict:
      for (auto& kv : obj->dict) {
        if (equal(kv.first, index)) {
          kv.second = v;
          return;
        }
      }
      obj->dict.emplace_back(index, v);
      return;
    case Type::Tensor: {
      noteTensorWrite();
      const auto idx = tensorIndices(index);
      if (v->type == Type::Tensor) {
        if (v->tensor.scalar_type() != obj->tensor.scalar_type() &&
            host_.viewsModelMemory(obj->tensor))
          fail("cannot write a tensor of dtype " + dtypeRepr(v->tensor.scalar_type()) +
               " into a port value of dtype " + dtypeRepr(obj->tensor.scalar_type()) +
               "; convert it first with .to(" + dtypeRepr(obj->tensor.scalar_type()) + ")");
        at::Tensor target = obj->tensor.index(idx);
        if (!target.sizes().equals(v->tensor.sizes()) && v->tensor.numel() != 1) {
          // Broadcasting as torch would, but a clear message when it cannot.
          try {
            obj->tensor.index_put_(idx, v->tensor.to(obj->tensor.options()));
          } catch (const c10::Error&) {
            fail("cannot write a tensor of shape " + repr(sizeOf(v->tensor)) +
                 " into a slice of shape " + repr(sizeOf(target)));
          }
          return;
        }
        obj->tensor.index_put_(idx, v->tensor.to(obj->tensor.options()));
      } else {
        obj->tensor.index_put_(idx, asNumber(v, "value"));
      }
      return;
    }
    default:
      fail(std::string("'") + typeName(obj->type) + "' object does not support item assignment");
  }
}

Value Interpreter::formatValue(const Value& v, const std::string& format) {
  // `format` is what followed the expression in its field: "", "!r", "!s", ":spec" or "!r:spec".
  std::string spec = format;
  Value value = v;
  if (!spec.empty() && spec[0] == '!') {
    const std::string conversion = spec.substr(0, 2);
    if (conversion != "!r" && conversion != "!s" && conversion != "!a")
      fail("f-string conversion '" + conversion + "' is not supported (use !r, !s or !a)");
    value = string(conversion == "!s" ? str(v) : repr(v));
    spec = spec.substr(2);
    if (!spec.empty() && spec[0] != ':')
      fail("f-string field: expected ':' or '}' after '" + conversion + "', got '" + spec + "'");
  }
  if (!spec.empty()) spec = spec.substr(1);  // the ':'
  if (spec.empty()) return string(str(value));
  const FormatSpec parsed = parseFormatSpec(spec);
  if (value->type == Type::Tensor && value->tensor.numel() == 1)  // as torch: the element's format
    value = value->tensor.is_floating_point() ? floating(value->tensor.item<double>())
                                              : integer(value->tensor.item<int64_t>());
  switch (value->type) {
    case Type::Int:
    case Type::Bool:
      return string(
          formatInteger(value->type == Type::Bool ? value->boolValue : value->intValue, parsed));
    case Type::Float:
      return string(formatFloat(value->floatValue, parsed));
    case Type::Str:
      return string(formatString(value->str, parsed));
    default:
      fail(std::string("format spec '") + spec + "' does not apply to a '" + typeName(value->type) +
           "' (format specs apply to int, float, str and one-element tensors; use str(x) or "
           "repr(x) first)");
  }
}

}  // namespace shardscope::trace
