// Interpreter: evaluates a trace script's syntax tree. The same interpreter runs the driver's top
// level and, inside each mediator's coroutine, an invoke's block; what differs is the Host, which
// resolves everything that touches the model or the trace (ports, parameters, steps, printing).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "ast.h"
#include "memory_budget.h"
#include "value.h"
#include "weak_set.h"

namespace shardscope {
class Tokenizer;
}

namespace shardscope::trace {

class Interpreter;

class Environment {
 public:
  explicit Environment(std::shared_ptr<Environment> parent = nullptr)
      : parent_(std::move(parent)) {}
  Value* find(const std::string& name);
  void set(const std::string& name, Value v) { vars_[name] = std::move(v); }
  std::map<std::string, Value>& vars() { return vars_; }
  const std::map<std::string, Value>& vars() const { return vars_; }
  const std::shared_ptr<Environment>& parent() const { return parent_; }
  // For a rank's copy of a driver call's scope, made before the block's scope it belongs under.
  void setParent(std::shared_ptr<Environment> parent) { parent_ = std::move(parent); }

 private:
  std::map<std::string, Value> vars_;
  std::shared_ptr<Environment> parent_;
};

// Thrown by a host when a request ended while a pass of an unbounded tracer.iter[:] waited.
struct RequestEnded {};

class Host {
 public:
  virtual ~Host() = default;
  virtual Value moduleAttribute(Interpreter& in, const Value& module, const std::string& name) = 0;
  virtual void setModuleAttribute(Interpreter& in, const Value& module, const std::string& name,
                                  const Value& v) = 0;
  virtual Value moduleIndex(Interpreter& in, const Value& module, long long index) = 0;
  // How many modules `module[i]` names (model.model.layers: the layers), or nullopt when the module
  // is not a list of modules. len() and `for layer in ...` use it.
  virtual std::optional<long long> moduleLength(Interpreter& in, const Value& module) = 0;
  virtual Value callModule(Interpreter& in, const Value& module, CallArgs& args) = 0;
  virtual Value tracerAttribute(Interpreter& in, const Value& tracer, const std::string& name) = 0;
  // Runs a `with` statement whose context is `context` (model.trace, tracer.invoke).
  virtual void runWith(Interpreter& in, const Stmt& with, const Value& context) = 0;
  // Runs `body(step)` for each step of a tracer.iter range, setting the current step.
  virtual void iterateSteps(Interpreter& in, const Value& range,
                            const std::function<bool(long long)>& body) = 0;
  virtual void print(const std::string& line) = 0;
  // Whether `t` views model memory (a port value): `.save()` copies such a tensor at once.
  virtual bool viewsModelMemory(const at::Tensor& t) const { return false; }
  // Why `name` is not defined, where the host knows more than "not defined" (e.g. another invoke
  // assigns it later); empty: the plain NameError.
  virtual std::string undefinedName(const std::string&) { return {}; }
  // The trace block's lifetime (empty on the driver): a function made in the block is callable
  // only while the block lives and on its rank's thread, as the block's builtins are.
  virtual std::weak_ptr<const void> blockLifetime() const { return {}; }
  // torch.Tensor for `model.tokenizer` etc. are reached through moduleAttribute of the root.
};

class Interpreter {
 public:
  // `budget` bounds evaluation steps; `memory` the bytes the block's values hold (default:
  // unbounded).
  Interpreter(std::shared_ptr<const Program> program, Host& host,
              std::shared_ptr<Environment> globals, long long budget,
              MemoryBudget memory = MemoryBudget(0));

  // Runs statements; errors come out as ScriptError with file, line, column and statement.
  void run(const Block& block);
  void exec(const Stmt& s);

  // An in-place write into a tensor (a port value or a view of one) since the last take: the
  // interleaver takes it after serving a port, to re-shard the value only when it was written.
  void noteTensorWrite() { wroteTensor_ = true; }
  bool takeTensorWrite() { return std::exchange(wroteTensor_, false); }
  Value eval(const Expr& e);
  // A call's arguments, its *args and **kwargs unpacked (`callee` names it in errors: "f()").
  CallArgs evalArguments(const Expr& call, const std::string& callee);
  void assign(const Expr& target, const Value& v);

  Value call(const Value& fn, CallArgs& args);
  Value getAttr(const Value& obj, const std::string& name);
  Value getItem(const Value& obj, const Value& index);
  void setItem(const Value& obj, const Value& index, const Value& v);
  // `del obj[index]`.
  void delItem(const Value& obj, const Value& index);
  Value binary(BinaryOp op, const Value& a, const Value& b);
  // `a < b` as the script's `<` reads it (numbers, strings, tuples and lists element by element):
  // the order min, max and sorted use.
  bool less(const Value& a, const Value& b) { return truthy(compare(CompareOp::Lt, a, b)); }

  const Program& program() const { return *program_; }
  const std::shared_ptr<const Program>& programPtr() const { return program_; }
  Host& host() { return host_; }
  const std::shared_ptr<Environment>& globals() const { return globals_; }
  // Names assigned at the top level of this interpreter (the block's scope).
  const std::set<std::string>& assignedGlobals() const { return assigned_; }
  // Copies taken by `name.save()` of a value that viewed model memory, by name: reported for a
  // name whose value at the end of the trace is not itself saved.
  const std::map<std::string, Value>& savedSnapshots() const { return savedSnapshots_; }
  // The call scopes this interpreter made functions in that are still alive: a function defined in
  // a call closes over the call's scope, which holds it, so the two outlive the call unless
  // releaseCycles or releaseScopes (scope_release.h) is handed the scope.
  std::vector<std::shared_ptr<Environment>> functionScopes() const;
  // The lists and dicts this interpreter stored a value into that holds values (`x.append(x)`,
  // `d['e'] = e`), still alive: a cycle among them outlives every scope, a call's that is over
  // too, unless releaseCycles (scope_release.h) is handed them.
  std::vector<Value> cycleCandidates() const;
  // Raises ScriptError at the statement being run.
  [[noreturn]] void fail(const std::string& message) const;
  // Raises ScriptError for a bug in ShardScope met while running the statement (not the script's
  // mistake): the message says so and keeps the internal detail.
  [[noreturn]] void failInternal(const std::string& detail) const;
  // Memory accounting (MemoryBudget): `request` before creating `bytes`, `charged` after (and
  // chargeMemory for bytes made that no one value holds alone: an unpacking's references).
  void requestMemory(int64_t bytes);
  void chargeMemory(int64_t bytes);
  Value charged(Value v);
  SourceLocation location() const { return at_; }
  // Expires with this interpreter: what its builtins and deferred values check (boundToBlock).
  std::weak_ptr<const void> lifetime() const { return lifetime_; }

  // Deferred values: a held module call's output (DeferredCalls, in the mediator), and the tensor
  // ops a script applies to one (indexing, argmax). `compute` runs when the script first needs the
  // tensor, or at resolveDeferred(); it returns the call's output and, when its group's calls had
  // rows alike, where it lies among theirs (StackedRow), so that alike ops on them run once.
  Value deferredCall(std::function<StackedRow()> compute);
  // Computes every deferred value still held (the end of a block: what it saved must be tensors).
  void resolveDeferred();
  // After a failure: deferred values still held say, when read, that they were never computed.
  void abandonDeferred(const std::string& why);
  // Makes `v` (and with `deep` the values inside it) a tensor before the script or a builtin sees
  // it. Every deferred op is computed first: the script may edit the tensor in place next, and an
  // op made before the edit must not see it.
  void force(const Value& v, bool deep = false);
  // Notes that `stored` was put into `container` (a cycle candidate when it holds values): the
  // container methods that store (dict.update) call it.
  void noteStored(const Value& container, const Value& stored);
  // `v` as an f-string field formats it: `format` is what followed the expression ("", "!r",
  // ":>8.2f", "!s:^5"); str.format's fields too.
  Value formatValue(const Value& v, const std::string& format);
  // Python's `item is x or item == x`, as `in`, list.index, count and remove search a sequence: a
  // tensor compares by its `==` (one element's truth; more elements are ambiguous, an error).
  bool searchEquals(const Value& item, const Value& x);
  // One evaluation step against the instruction budget (and the stack's headroom): a builtin that
  // loops without materialising (sum over a range) counts its steps too.
  void tick();

 private:
  void runBody(const Block& body);
  // exec's longer statements.
  void execAssign(const Stmt& s);
  void execAugAssign(const Stmt& s);
  void execFor(const Stmt& s);
  void execImport(const Stmt& s);
  void execDelete(const Expr& target);
  void setSlice(const Value& list, const Value& slice, const Value& v);
  // eval without forcing a deferred result: where a value may stay deferred (an assignment to a
  // name, a call's arguments, the receiver of a subscript or a method).
  Value evalLazy(const Expr& e);
  Value deferredMethod(const Value& self, const std::string& name);
  Value deferredIndex(const Value& self, const Value& index);
  Value evalCall(const Expr& e);
  std::vector<Value> starredItems(const Expr& starred, const std::string& what);
  void addKeyword(CallArgs& args, const std::string& callee, const std::string& name, Value v);
  void assignItems(const std::vector<ExprPtr>& targets, const std::vector<Value>& items);
  Value makeFunction(const std::string& name, const std::vector<Param>& params, const Block& body,
                     ExprPtr lambdaBody);
  Value callFunction(const FunctionDef& f, CallArgs& args);
  Value compare(CompareOp op, const Value& a, const Value& b);
  Value arithmetic(BinaryOp op, const Value& a, const Value& b);
  Value save(const Expr& receiver);
  bool holdsModelMemory(const Value& v) const;
  int64_t heldBytes(const Value& made = nullptr) const;

  std::shared_ptr<const Program> program_;
  Host& host_;
  std::shared_ptr<Environment> globals_;
  std::shared_ptr<Environment> env_;
  std::set<std::string> assigned_;
  std::set<std::string> deleted_;  // names `del` unbound here: using one again is a plain NameError
  bool wroteTensor_ = false;
  std::map<std::string, Value> savedSnapshots_;
  WeakSet<Environment> functionScopes_;  // call scopes a function was defined in
  WeakSet<Object> cycleCandidates_;      // see cycleCandidates
  const std::shared_ptr<const int> lifetime_ = std::make_shared<const int>(0);
  long long budget_;
  long long steps_ = 0;
  MemoryBudget memory_;
  SourceLocation at_;
  const Stmt* stmt_ = nullptr;
  int depth_ = 0;
  const FunctionDef* running_ = nullptr;  // the function whose call runs now (its qualified name)
  struct DeferredOp;
  struct Held {
    std::weak_ptr<Object> value;
    std::shared_ptr<const DeferredOp> op;  // null for a call's output
    std::shared_ptr<StackedRow> row;       // where the computed value lies among its siblings'
  };
  Value held(std::function<at::Tensor()> compute, std::shared_ptr<const DeferredOp> op,
             std::shared_ptr<StackedRow> row);
  void resolveOps();
  at::Tensor runStacked(const DeferredOp& op, const at::Tensor& stacked);
  std::vector<Held> deferred_;
};

// Python builtins (len, range, print, ...) and the torch namespace: one immutable scope built once
// and shared by every script as the outermost parent. print() prints through the calling
// interpreter's Host::print.
const std::shared_ptr<Environment>& builtinScope();
// `model.tokenizer`: encode(text) -> list of ids, decode(ids or tensor) -> text.
Value tokenizerValue(std::shared_ptr<const Tokenizer> tokenizer);
// The `torch` namespace: dtypes, constructors, the tensor functions scripts use,
// torch.nn.functional (torch_functions.cpp).
Value torchNamespace();
// Attribute `name` of a tensor value: a property (shape, dtype, T) or a bound method.
Value tensorAttribute(Interpreter& in, const Value& self, const std::string& name);
// A copy of `v` that later in-place edits of model memory cannot change.
Value snapshot(const Value& v);
// The values iterating `v` yields (a sequence's items, a range's ints, a dict's keys, a string's
// characters, a tensor's rows); an error for a value that is not iterable. The values it makes
// are asked of `in`'s memory budget first.
std::vector<Value> elementsOf(const Value& v, Interpreter& in);
// Whether elementsOf(v) iterates v (a 0-d tensor is not iterable, as in torch).
bool isIterable(const Value& v);
// `vs` in the order sorted(vs, key=..., reverse=...) gives, with a's key= and reverse=.
std::vector<Value> sortedByKey(const CallArgs& a, const std::vector<Value>& vs);
// Converts a value to a tensor (numbers, nested lists) on `like`'s device and dtype if given.
at::Tensor toTensor(const Value& v, const at::Tensor* like = nullptr);
// The other operand of an operator on tensor `like`: a Python number as torch takes one, a 0-d
// tensor of its own kind (bool, int64, double) that type promotion ranks below every tensor (a
// wrapped number: an int64 tensor times 0.5 is float32, a bfloat16 one plus 0.1 stays bfloat16
// and multiplies by 0.1 itself, not 0.1 rounded to bfloat16); anything else toTensor(v, &like).
at::Tensor operandTensor(const Value& v, const at::Tensor& like);
// Converts a Python-style index (int, slice, None, Ellipsis, tensor, tuple of those) for torch.
std::vector<at::indexing::TensorIndex> tensorIndices(const Value& index);
int64_t asInt(const Value& v, const char* what);
// "torch.bfloat16" etc., as torch prints a dtype.
std::string dtypeRepr(at::ScalarType t);
double asNumber(const Value& v, const char* what);

}  // namespace shardscope::trace
