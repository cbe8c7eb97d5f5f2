// Interpreter: its state (environment, budgets, errors), statements and calls of script functions.
// Assignment and del are in interpreter_assign.cpp; expressions and operators in
// interpreter_eval.cpp; attributes, methods and subscripts of values in interpreter_objects.cpp.
#include "interpreter.h"

#include "argument_binding.h"

#include <algorithm>

#include "dict_view.h"
#include "stack_headroom.h"
#include "trace_device.h"

#include <c10/util/Exception.h>

namespace shardscope::trace {
namespace {

struct BreakSignal {};
struct ContinueSignal {};
struct ReturnSignal {
  Value value;
};

// Python's __qualname__ of a function `name` made while `running` runs (null: at module level).
std::string qualifiedName(const FunctionDef* running, const std::string& name) {
  if (!running) return name;
  const bool comprehension = running->name == "<listcomp>" || running->name == "<dictcomp>" ||
                             running->name == "<genexpr>";
  return running->qualifiedName + (comprehension ? "." : ".<locals>.") + name;
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
                         MemoryBudget memory)
    : program_(std::move(program)),
      host_(host),
      globals_(std::move(globals)),
      env_(globals_),
      budget_(budget),
      memory_(std::move(memory)) {}

void Interpreter::fail(const std::string& message) const {
  throw ScriptError(program_->file, at_, stmt_ ? stmt_->source() : "", message);
}

void Interpreter::failInternal(const std::string& detail) const {
  fail(
      "internal error in ShardScope, not a mistake in the script (please report it with this "
      "script): " +
      detail);
}

int64_t Interpreter::heldBytes(const Value& made) const {
  return trace::heldBytes(*env_, builtinScope().get(), made);
}

void Interpreter::requestMemory(int64_t bytes) {
  const std::string error = memory_.request(bytes, [this] { return heldBytes(); });
  if (!error.empty()) fail(error);
}

void Interpreter::chargeMemory(int64_t bytes) {
  const std::string error = memory_.charge(bytes, [this] { return heldBytes(); });
  if (!error.empty()) fail(error);
}

Value Interpreter::charged(Value v) {
  int64_t bytes = 64;  // the value object itself
  if (v->type == Type::Tensor && v->tensor.defined()) bytes += int64_t(v->tensor.nbytes());
  if (v->type == Type::Tuple || v->type == Type::List) {  // topk's pair, nonzero's tuple
    for (const Value& item : v->items) {
      if (item->type == Type::Tensor && item->tensor.defined() && !item->tensor.is_view())
        bytes += int64_t(item->tensor.nbytes());
    }
  }
  bytes += int64_t(v->str.size() + (v->items.size() + v->dict.size() * 2) * sizeof(Value));
  // With v itself: not yet bound to a name, the walk would leave it out (an 80 MB torch.cat
  // passed a 64 MB budget); its storage counts once if a held tensor shares it.
  const std::string error = memory_.charge(bytes, [this, &v] { return heldBytes(v); });
  if (!error.empty()) fail(error);
  return v;
}

void Interpreter::tick() {
  if (++steps_ > budget_) {
    fail("instruction budget of " + std::to_string(budget_) +
         " evaluation steps exhausted (a runaway loop?); raise it with --budget if the work is "
         "real");
  }
  // Each statement and expression is a C++ call deeper: calls 200 deep, each with an expression
  // nested 200 deep, would run a block's stack out (stack_headroom.h).
  if (stackNearlyFull()) {
    fail(
        "maximum recursion depth exceeded: the function calls and the expressions nested in them "
        "go too deep for the interpreter's stack here; recurse less deeply or split the "
        "expressions");
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
      case StmtKind::Assign:
        execAssign(s);
        break;
      case StmtKind::AugAssign:
        execAugAssign(s);
        break;
      case StmtKind::If:
        if (truthy(eval(*s.value)))
          runBody(s.body);
        else
          runBody(s.orElse);
        break;
      case StmtKind::While: {
        bool broke = false;
        while (truthy(eval(*s.value))) {
          try {
            runBody(s.body);
          } catch (const BreakSignal&) {
            broke = true;
            break;
          } catch (const ContinueSignal&) {
          }
          at_ = s.at;
        }
        if (!broke) runBody(s.orElse);
        break;
      }
      case StmtKind::For:
        execFor(s);
        break;
      case StmtKind::Def: {
        env_->set(s.op, makeFunction(s.op, s.params, s.body, nullptr));
        if (env_ == globals_) assigned_.insert(s.op);
        break;
      }
      case StmtKind::Return:
        throw ReturnSignal{s.value ? evalLazy(*s.value) : none()};
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
      case StmtKind::Import:
        execImport(s);
        break;
      case StmtKind::Del:
        for (const auto& t : s.targets) execDelete(*t);
        break;
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

void Interpreter::execFor(const Stmt& s) {
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
      host_.iterateSteps(*this, iterable, [&](long long step) { return bodyOnce(integer(step)); });
    } else if (iterable->type == Type::Range) {
      for (long long i = iterable->rangeStart;
           iterable->rangeStep > 0 ? i < iterable->rangeStop : i > iterable->rangeStop;
           i += iterable->rangeStep) {
        bodyOnce(integer(i));
      }
    } else if (iterable->type == Type::List) {
      // By position over the list as it is at each pass, as Python's list iterator: items the
      // body appends are visited (a worklist, `for n in q: q.append(...)`), removed ones are not.
      for (size_t i = 0; i < iterable->items.size(); ++i) {
        const Value item = iterable->items[i];  // the body may replace or drop it
        bodyOnce(item);
      }
    } else if (iterable->type == Type::Tuple || iterable->type == Type::Size) {
      for (const auto& item : iterable->items) bodyOnce(item);
    } else if (iterable->type == Type::Dict || isDictView(iterable->type)) {
      // Each pass reads the dict as it is then. A pass that leaves other keys ends the loop with
      // Python's error: a key added or removed changes the size; one removed and another added
      // (Python raises once it meets the new key) changes the keys, never skipping an entry. A key
      // added and removed again in one pass leaves the loop going, as in Python.
      const Value& dict = iterable->type == Type::Dict ? iterable : viewedDict(*iterable);
      const Type kind = iterable->type == Type::Dict ? Type::DictKeys : iterable->type;
      const size_t n = dict->dict.size();
      std::vector<const Object*> keys(n);
      for (size_t i = 0; i < n; ++i) keys[i] = dict->dict[i].first.get();
      unsigned edits = dict->keyEdits;
      const auto sameKeys = [&] {
        for (size_t i = 0; i < n; ++i) {
          if (dict->dict[i].first.get() != keys[i]) return false;
        }
        return true;
      };
      for (size_t i = 0; i < n; ++i) {
        bodyOnce(viewElement(kind, dict->dict[i]));
        if (dict->keyEdits == edits) continue;
        edits = dict->keyEdits;
        if (dict->dict.size() == n && sameKeys()) continue;
        at_ = s.at;
        fail(dict->dict.size() != n ? "dictionary changed size during iteration"
                                    : "dictionary keys changed during iteration");
      }
    } else if (iterable->type == Type::Str) {
      for (char c : iterable->str) bodyOnce(string(std::string(1, c)));
    } else if (iterable->type == Type::Tensor) {
      for (int64_t i = 0; i < iterable->tensor.size(0); ++i) bodyOnce(tensor(iterable->tensor[i]));
    } else if (iterable->type == Type::Module) {  // `for layer in model.model.layers`
      const auto n = host_.moduleLength(*this, iterable);
      if (!n)
        fail("cannot iterate over " + iterable->str +
             ": it is not a list of modules (model.model.layers is one)");
      for (long long i = 0; i < *n; ++i) bodyOnce(host_.moduleIndex(*this, iterable, i));
    } else {
      fail(std::string("cannot iterate over ") + typeName(iterable->type));
    }
  } catch (const BreakSignal&) {
    return;
  }
  runBody(s.orElse);  // the loop ended without break
}

void Interpreter::execImport(const Stmt& s) {
  static const std::set<std::string> modules = {"torch",      "nnsight", "nnsight.modeling.vllm",
                                                "shardscope", "vllm",    "vllm.inputs"};
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
    return;
  }
  for (const auto& n : s.names) {
    static const std::set<std::string> names = {"VLLM", "LanguageModel", "TokensPrompt"};
    if (!names.count(n))
      fail("cannot import '" + n + "' from " + s.op +
           ": available names are VLLM, LanguageModel and TokensPrompt");
    const Value* v = globals_->find(n);
    // A block has the names it and the driver functions it reaches mention, and `del` may have
    // removed one.
    if (!v)
      fail("cannot import '" + n + "' here: " + n +
           " is not in this scope; import it where the script starts, or name it in the trace "
           "block");
    env_->set(n, *v);
  }
}

Value Interpreter::makeFunction(const std::string& name, const std::vector<Param>& params,
                                const Block& body, ExprPtr lambdaBody) {
  auto f = std::make_shared<FunctionDef>();
  f->name = name;
  f->qualifiedName = qualifiedName(running_, name);
  f->params = params;
  for (const auto& p : params)
    f->defaults.push_back(p.defaultValue ? eval(*p.defaultValue) : nullptr);
  f->body = body;
  f->lambdaBody = std::move(lambdaBody);
  f->closure = env_;  // closures see the scope they were made in
  if (env_ != globals_) functionScopes_.insert(env_);
  if (std::weak_ptr<const void> block = host_.blockLifetime(); !block.expired())
    bindToBlock(*f, std::move(block));
  auto v = std::make_shared<Object>();
  v->type = Type::Function;
  v->function = f;
  return v;
}

std::vector<std::shared_ptr<Environment>> Interpreter::functionScopes() const {
  return functionScopes_.live();
}

void Interpreter::noteStored(const Value& container, const Value& stored) {
  // An empty list stored into itself closes a cycle too; any other value that closes one reaches
  // the container, so it holds values.
  if (stored == container || holdsValues(*stored)) cycleCandidates_.insert(container);
}

std::vector<Value> Interpreter::cycleCandidates() const {
  return cycleCandidates_.live();
}

Value Interpreter::call(const Value& fn, CallArgs& args) {
  // A script function binds its arguments as they are; builtins and modules see tensors.
  if (fn->type != Type::Function && !fn->takesDeferred) {
    for (const Value& v : args.positional) force(v, true);
    for (const auto& [k, v] : args.keywords) force(v, true);
  }
  switch (fn->type) {
    case Type::Builtin:
      args.callee = fn->str;
      args.interpreter = this;
      if (!fn->items.empty()) {  // a bound method (list.append): its receiver may now hold them
        for (const Value& v : args.positional) noteStored(fn->items.front(), v);
      }
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
  if (f.blockThread != std::thread::id()) requireBlock(f.block, f.blockThread, f.name + "()");
  if (++depth_ > 200) {
    --depth_;
    fail("maximum recursion depth (200) exceeded in " + f.name);
  }
  auto local = std::make_shared<Environment>(f.closure);
  std::vector<std::pair<std::string, Value>> bound;
  try {
    bound = bindArguments(f, args);
  } catch (...) {
    --depth_;
    throw;
  }
  for (auto& [name, v] : bound) local->set(name, std::move(v));
  std::swap(env_, local);
  const FunctionDef* caller = running_;
  running_ = &f;
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
    running_ = caller;
    --depth_;
    throw;
  }
  std::swap(env_, local);
  running_ = caller;
  stmt_ = callerStmt;
  at_ = callerAt;
  --depth_;
  return result;
}

}  // namespace shardscope::trace
