// Values of the trace language. Every value is a shared Object; None, True and False are
// singletons. Tensors are LibTorch tensors on the rank's device. Proxies (module, port, tracer)
// carry what the interpreter's host needs to resolve them.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "ast.h"
#include "dict_index.h"

namespace shardscope::trace {

struct Object;
using Value = std::shared_ptr<Object>;
class Environment;
class Interpreter;

enum class Type {
  None,
  Bool,
  Int,
  Float,
  Str,
  Tuple,
  List,
  Dict,
  Slice,
  Range,
  Function,
  Builtin,
  Tensor,
  Size,
  Module,
  Tracer,
  IterRange,
  ResultObject,
  Namespace,
  Unsaved,
  Ellipsis,
  Deferred,  // a tensor not computed yet (a batched module call, DeferredCalls); reads as a Tensor
  DictKeys,  // d.keys(), d.values(), d.items(): views of the dict in items[0] (dict_view.h)
  DictValues,
  DictItems,
  Device  // torch.device: str holds c10's name of it ('cpu', 'cuda', 'cuda:0')
};

const char* typeName(Type t);

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keywords;
  SourceLocation at;
  std::string callee;  // the builtin's name, for error messages (set by Interpreter::call)
  Interpreter* interpreter = nullptr;  // the caller (set by Interpreter::call): len() of a module

  const Value* keyword(const std::string& name) const;
  // The i-th positional argument; a missing one is the script's error naming the function and the
  // argument (`name`, when given, else its position).
  const Value& required(size_t i, const char* name = nullptr) const;
  // The i-th positional argument, else the keyword `name`, else nullptr.
  const Value* get(size_t i, const std::string& name) const;
};

using BuiltinFn = std::function<Value(CallArgs&)>;

struct FunctionDef {
  std::string name;
  // Python's __qualname__: "g.<locals>.f" for f made in a call of g ("<listcomp>.<lambda>" inside
  // a comprehension); Python's argument errors name a function by it.
  std::string qualifiedName;
  std::vector<Param> params;
  std::vector<Value> defaults;  // evaluated at definition, parallel to params (null: none)
  Block body;                   // def
  ExprPtr lambdaBody;           // lambda
  std::shared_ptr<Environment> closure;
  // A function made in a trace block, or a rank's copy of a driver function, which close over the
  // block's scope (or a rank's copy of a driver call's scope under it): callable only in that
  // block, on its rank's thread (requireBlock). Unset (a default id) for the driver's functions.
  std::weak_ptr<const void> block;
  std::thread::id blockThread;
};

struct Object {
  Object() = default;
  Object(const Object&) = default;
  Object(Object&&) = default;
  Object& operator=(const Object&) = default;
  Object& operator=(Object&&) = default;
  // Frees the values it holds without recursing into them: a list nested 100000 deep (a loop's
  // `x = [x]`) would otherwise be freed a C++ call a level and run the stack out.
  ~Object();

  Type type = Type::None;
  bool saved = false;
  bool boolValue = false;
  // Dict: counts keys added and removed, so that a loop over the dict can tell that its keys
  // changed when their number did not (one removed, one added).
  unsigned keyEdits = 0;
  long long intValue = 0;
  double floatValue = 0;
  std::string str;           // Str; Module path; Namespace name; Unsaved name
  std::vector<Value> items;  // Tuple, List, Size (as Ints), Slice (start, stop, step), dict views
                             // (the dict)
  std::vector<std::pair<Value, Value>> dict;
  DictIndex dictIndex;  // findKey's, for a large dict (dict_index.h)
  at::Tensor tensor;
  BuiltinFn builtin;           // Builtin (also bound methods)
  bool takesDeferred = false;  // Builtin: may receive Deferred arguments as they are (list.append)
  bool pythonClass = false;    // Builtin: one of Python's classes (list, dict, int): its repr
  std::function<at::Tensor()> compute;  // Deferred: makes the tensor (once)
  std::shared_ptr<FunctionDef> function;
  std::map<std::string, Value> attributes;  // ResultObject fields, Namespace members
  // Tuple: a named tuple's field names, parallel to items, its type named in str
  // (torch.return_types.topk: `.values`, `.indices`).
  std::shared_ptr<const std::vector<std::string>> fields;
  long long rangeStart = 0, rangeStop = 0, rangeStep = 1;  // Range, IterRange (stop < 0: unbounded)
  bool unbounded = false;
};

// Constructors.
Value none();
Value boolean(bool b);
Value integer(long long v);
Value floating(double v);
Value string(std::string s);
Value tuple(std::vector<Value> items);
Value list(std::vector<Value> items);
Value dict(std::vector<std::pair<Value, Value>> entries = {});
Value tensor(at::Tensor t);
Value sizeOf(const at::Tensor& t);
Value deviceValue(const c10::Device& d);
Value builtin(std::string name, BuiltinFn fn);
// Makes builtin `v` fail with the script's error, not a crash, when called after `block` (a trace
// block's interpreter, mediator or interleaver, which its function reaches) is gone, or from
// another thread than the one that made it. Scripts cannot hand one out of its block (each rank
// has its own copies of the driver's values, and save() refuses builtins): a guard, should a
// way appear.
Value boundToBlock(Value v, std::weak_ptr<const void> block);
// Binds script function f the same way, to `block` and this thread (a function made in a trace
// block, or a rank's copy of a driver function): Interpreter::callFunction checks it.
void bindToBlock(FunctionDef& f, std::weak_ptr<const void> block);
// The check boundToBlock makes: the script's error, naming `what`, unless `block` is alive and
// this is the thread that made the value (`thread`: its rank's; a driver function can hand one
// rank's builtin to another's block, whose thread must not run the first's collectives).
void requireBlock(const std::weak_ptr<const void>& block, std::thread::id thread,
                  const std::string& what);
// Method `name` of a list, tuple or dict bound to `receiver` (held in the method's items; see
// interpreter_objects.cpp), or null where it has none.
Value boundMethodOf(const Value& receiver, const std::string& name);
Value moduleProxy(std::string path);

// A tensor that is block `index` of `stacked` along its first dimension (stacked[index] is it): a
// held call's output among its group's, or an op's result among its siblings'. `stacked`
// undefined: it lies alone.
struct StackedRow {
  at::Tensor value, stacked;
  int64_t index = 0;
};

// Computes a Deferred value: the object becomes the Tensor it stands for, in place, so every name
// and list holding it sees the tensor. resolveDeep also resolves the items of tuples, lists and
// dicts. Other values are left as they are.
void resolve(const Value& v);
void resolveDeep(const Value& v);
// Whether v or any value inside its tuples, lists and dicts is Deferred.
bool holdsDeferred(const Value& v);
// Whether o holds other values (items, dict entries, attributes) or is a function: what a reference
// cycle can pass through.
bool holdsValues(const Object& o);
// Whether `test` holds for v or for a value inside it (the items of tuples, lists and dict views,
// the keys and values of dicts, the attributes of results and namespaces; not a bound method's
// list), each object tested once. It keeps a list of what is left to visit instead of recursing,
// so a value that holds itself, or nests 100000 levels deep, is walked safely.
bool anyInside(const Value& v, const std::function<bool(const Value&)>& test);

// The number of values a Range yields (Python's len(range(...))).
long long rangeLength(const Object& r);

// Python's truth value, repr(), ascii() (repr with non-ASCII escaped) and str().
bool truthy(const Value& v);
std::string repr(const Value& v);
std::string ascii(const Value& v);
std::string str(const Value& v);
// As torch prints it (tensor_repr.cpp).
std::string formatTensor(const at::Tensor& t);
// An int, float or bool: what torch takes beside a tensor as a Python number.
bool isNumber(const Value& v);
// Whether two values are one dict key: numbers by value (1 == 1.0 == True), containers item by
// item, a tensor by identity (it hashes by its id).
bool equal(const Value& a, const Value& b);
// Dict d's entry for `key`, or d.dict.end(). A key Python cannot hash (a list, a dict, keys() or
// items(), or a tuple holding one) is refused as Python refuses it ("unhashable type: 'list'"):
// found by equality here, it would find what a hash never could.
using DictEntries = std::vector<std::pair<Value, Value>>;
DictEntries::iterator findKey(Object& d, const Value& key);
// Removes an entry of dict `d`, or all of them, counting the edit (Object::keyEdits) and keeping
// its index (dict_index.h) right: every removal from a live dict goes through these.
void eraseEntry(Object& d, DictEntries::iterator entry);
void clearEntries(Object& d);
// Python's bool(a == b) (items of containers by PyObject_RichCompareBool, identity first): as
// `equal`, but a tensor compares by its `==` (one element's truth; more elements are torch's
// ambiguity error), inside containers too ([t1] == [t2], `t in [t2]`, `(t,) in pairs`). Deferred
// values must be computed first.
bool pythonEquals(const Value& a, const Value& b);
// For two numbers (int, bool, float): -1, 0 or 1 as a < b, a == b, a > b, compared by their exact
// values as Python does (an int is not rounded to a double first: 2**53 + 1 > 2**53); nullopt when
// a NaN leaves them unordered.
std::optional<int> compareNumbers(const Value& a, const Value& b);

// An error raised while running a script: the interpreter adds file, line and statement.
class RuntimeFailure : public std::runtime_error {
 public:
  explicit RuntimeFailure(const std::string& what) : std::runtime_error(what) {}
};

// Walks that follow values into values and build a result as they go (==, <, repr, the copies
// that save() and a trace block make, torch.tensor of nested lists) recurse once a level. A value
// nested deeper than this (a loop's `x = [x]` run 100000 times), or two values that each contain
// themselves compared, is refused as CPython refuses it, with a RecursionError's message (its
// default limit is 1000 too), instead of being followed until the stack runs out.
constexpr int kMaxValueNesting = 1000;

// One level deeper in such a walk for as long as it lives: past kMaxValueNesting levels, or where
// little stack is left (stack_headroom.h), it throws RuntimeFailure("maximum recursion depth
// exceeded " + during). A walk never suspends the block it runs in, so one count per thread
// serves every block on the thread.
class NestingGuard {
 public:
  explicit NestingGuard(const char* during);
  ~NestingGuard();
  NestingGuard(const NestingGuard&) = delete;
  NestingGuard& operator=(const NestingGuard&) = delete;
};

}  // namespace shardscope::trace
