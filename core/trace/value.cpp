#include "value.h"

#include "builtin_args.h"
#include "dict_view.h"
#include "stack_headroom.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <unordered_set>

namespace shardscope::trace {

const char* typeName(Type t) {
  switch (t) {
    case Type::None:
      return "NoneType";
    case Type::Bool:
      return "bool";
    case Type::Int:
      return "int";
    case Type::Float:
      return "float";
    case Type::Str:
      return "str";
    case Type::Tuple:
      return "tuple";
    case Type::List:
      return "list";
    case Type::Dict:
      return "dict";
    case Type::Slice:
      return "slice";
    case Type::Range:
      return "range";
    case Type::Function:
      return "function";
    case Type::Builtin:
      return "builtin_function_or_method";
    case Type::Tensor:
    case Type::Deferred:
      return "Tensor";
    case Type::Size:
      return "torch.Size";
    case Type::Module:
      return "Module";
    case Type::Tracer:
      return "Tracer";
    case Type::IterRange:
      return "tracer.iter";
    case Type::ResultObject:
      return "object";
    case Type::Namespace:
      return "module";
    case Type::Unsaved:
      return "unsaved";
    case Type::Ellipsis:
      return "ellipsis";
    case Type::DictKeys:
      return "dict_keys";
    case Type::DictValues:
      return "dict_values";
    case Type::DictItems:
      return "dict_items";
    case Type::Device:
      return "torch.device";
  }
  return "?";
}

const Value* CallArgs::keyword(const std::string& name) const {
  for (const auto& [k, v] : keywords) {
    if (k == name) return &v;
  }
  return nullptr;
}

const Value& CallArgs::required(size_t i, const char* name) const {
  if (i < positional.size()) return positional[i];
  const std::string fn = callee.empty() ? "the function" : callee + "()";
  const std::string which =
      name ? "'" + std::string(name) + "' (argument " + std::to_string(i + 1) + ")"
           : "argument " + std::to_string(i + 1);
  throw RuntimeFailure(fn + " is missing its " + which + "; it was given " +
                       std::to_string(positional.size()) + " positional argument" +
                       (positional.size() == 1 ? "" : "s"));
}

const Value* CallArgs::get(size_t i, const std::string& name) const {
  if (i < positional.size()) return &positional[i];
  return keyword(name);
}

namespace {

// Freeing a value frees what it holds, a C++ call deeper each level. The first kFreedInPlace
// levels are freed so, as any value is; below them an object hands what it holds to the
// outermost ~Object running on the thread, which frees it from a loop, kFreedInPlace levels at a
// time. A list nested 100000 deep is so freed on a block's small stack.
constexpr int kFreedInPlace = 64;
thread_local int freeing = 0;  // ~Object calls freeing what they hold, on this thread
// The outermost call's list. A pointer (nothing to tear down when the thread ends), so that
// objects freed then (the values of a static scope) still find it valid.
thread_local std::vector<std::shared_ptr<void>>* toFree = nullptr;

thread_local int nesting = 0;  // NestingGuard's levels on this thread

}  // namespace

Object::~Object() {
  if (!holdsValues(*this)) return;
  if (freeing >= kFreedInPlace && toFree) {
    const auto later = [](auto& p) {
      try {
        if (p) toFree->push_back(std::move(p));
      } catch (const std::bad_alloc&) {  // freed here with the members after all
      }
    };
    for (Value& v : items) later(v);
    for (auto& [k, v] : dict) {
      later(k);
      later(v);
    }
    for (auto& [name, v] : attributes) later(v);
    later(function);  // a closure's scope holds values too: `f = make(f)` in a loop chains them
    return;
  }
  std::vector<std::shared_ptr<void>> pending;
  const bool outermost = !toFree;
  if (outermost) toFree = &pending;
  ++freeing;
  items.clear();
  dict.clear();
  attributes.clear();
  function.reset();
  --freeing;
  if (!outermost) return;
  while (!pending.empty()) {
    std::shared_ptr<void> next = std::move(pending.back());
    pending.pop_back();
    next.reset();  // may add to `pending`
  }
  toFree = nullptr;
}

NestingGuard::NestingGuard(const char* during) {
  if (nesting >= kMaxValueNesting || stackNearlyFull())
    throw RuntimeFailure(std::string("maximum recursion depth exceeded ") + during);
  ++nesting;
}

NestingGuard::~NestingGuard() {
  --nesting;
}

namespace {
Value make(Type t) {
  auto o = std::make_shared<Object>();
  o->type = t;
  return o;
}
}  // namespace

Value none() {
  static const Value v = make(Type::None);
  return v;
}
Value boolean(bool b) {
  static const Value t = [] {
    Value v = make(Type::Bool);
    v->boolValue = true;
    return v;
  }();
  static const Value f = make(Type::Bool);
  return b ? t : f;
}
Value integer(long long i) {
  Value v = make(Type::Int);
  v->intValue = i;
  return v;
}
Value floating(double d) {
  Value v = make(Type::Float);
  v->floatValue = d;
  return v;
}
Value string(std::string s) {
  Value v = make(Type::Str);
  v->str = std::move(s);
  return v;
}
Value deviceValue(const c10::Device& d) {
  Value v = make(Type::Device);
  v->str = d.str();
  return v;
}
Value tuple(std::vector<Value> items) {
  Value v = make(Type::Tuple);
  v->items = std::move(items);
  return v;
}
Value list(std::vector<Value> items) {
  Value v = make(Type::List);
  v->items = std::move(items);
  return v;
}
Value tensor(at::Tensor t) {
  Value v = make(Type::Tensor);
  v->tensor = std::move(t);
  return v;
}
void resolve(const Value& v) {
  if (v->type != Type::Deferred) return;
  if (!v->compute) throw RuntimeFailure("a deferred tensor is being computed from itself");
  auto compute = std::move(v->compute);
  v->compute = nullptr;
  try {
    v->tensor = compute();
  } catch (const std::exception& e) {
    // Later reads say why instead of running the call again.
    const std::string why = e.what();
    v->compute = [why]() -> at::Tensor {
      throw RuntimeFailure("this tensor could not be computed earlier: " + why);
    };
    throw;
  }
  v->type = Type::Tensor;
}

bool holdsValues(const Object& o) {
  return !o.items.empty() || !o.dict.empty() || !o.attributes.empty() || o.function;
}

bool anyInside(const Value& v, const std::function<bool(const Value&)>& test) {
  if (test(v)) return true;
  // Not into a bound method's receiver: `sorted(k, key=big.get)` is not a value holding `big`.
  const auto entered = [](const Object& o) { return o.type != Type::Builtin && holdsValues(o); };
  if (!entered(*v)) return false;
  std::unordered_set<const Object*> seen{v.get()};
  std::vector<const Object*> left{v.get()};
  const auto visit = [&](const Value& x) {
    if (!seen.insert(x.get()).second) return false;
    if (test(x)) return true;
    if (entered(*x)) left.push_back(x.get());
    return false;
  };
  while (!left.empty()) {
    const Object* o = left.back();
    left.pop_back();
    for (const Value& item : o->items) {
      if (visit(item)) return true;
    }
    for (const auto& [k, x] : o->dict) {  // a key too: a function is hashable
      if (visit(k) || visit(x)) return true;
    }
    for (const auto& [name, x] : o->attributes) {
      if (visit(x)) return true;
    }
  }
  return false;
}

void resolveDeep(const Value& v) {
  anyInside(v, [](const Value& x) {
    resolve(x);
    return false;
  });
}

bool holdsDeferred(const Value& v) {
  return anyInside(v, [](const Value& x) { return x->type == Type::Deferred; });
}

Value sizeOf(const at::Tensor& t) {
  Value v = make(Type::Size);
  for (int64_t s : t.sizes()) v->items.push_back(integer(s));
  return v;
}
Value dict(std::vector<std::pair<Value, Value>> entries) {
  Value v = make(Type::Dict);
  v->dict = std::move(entries);
  return v;
}

Value builtin(std::string name, BuiltinFn fn) {
  Value v = make(Type::Builtin);
  v->str = std::move(name);
  v->builtin = std::move(fn);
  return v;
}
void requireBlock(const std::weak_ptr<const void>& block, std::thread::id thread,
                  const std::string& what) {
  if (block.expired())
    throw RuntimeFailure(what +
                         " belongs to a trace block that has ended: use it inside the block, and "
                         "save what it returns");
  if (std::this_thread::get_id() != thread)
    throw RuntimeFailure(what +
                         " belongs to another rank's trace block (each rank runs the block on "
                         "its own values): use it in the block that made it");
}

void bindToBlock(FunctionDef& f, std::weak_ptr<const void> block) {
  f.block = std::move(block);
  f.blockThread = std::this_thread::get_id();
}

Value boundToBlock(Value v, std::weak_ptr<const void> block) {
  v->builtin = [block = std::move(block), thread = std::this_thread::get_id(),
                fn = std::move(v->builtin), name = v->str](CallArgs& a) {
    requireBlock(block, thread, name + "()");
    return fn(a);
  };
  return v;
}

Value moduleProxy(std::string path) {
  Value v = make(Type::Module);
  v->str = std::move(path);
  return v;
}

long long rangeLength(const Object& r) {
  const long long span = r.rangeStep > 0 ? r.rangeStop - r.rangeStart : r.rangeStart - r.rangeStop;
  const long long step = r.rangeStep > 0 ? r.rangeStep : -r.rangeStep;
  return span <= 0 ? 0 : (span - 1) / step + 1;
}

bool isNumber(const Value& v) {
  return v->type == Type::Int || v->type == Type::Float || v->type == Type::Bool;
}

namespace {

// A tensor's truth, as torch's bool(): one element's value; more are ambiguous.
bool tensorTruth(const at::Tensor& t) {
  if (t.numel() != 1) {
    throw RuntimeFailure("the truth value of a tensor with " + std::to_string(t.numel()) +
                         " elements is ambiguous; use .any() or .all()");
  }
  return t.item<double>() != 0;
}

}  // namespace

bool truthy(const Value& v) {
  switch (v->type) {
    case Type::None:
      return false;
    case Type::Bool:
      return v->boolValue;
    case Type::Int:
      return v->intValue != 0;
    case Type::Float:
      return v->floatValue != 0;
    case Type::Str:
      return !v->str.empty();
    case Type::Tuple:
    case Type::List:
    case Type::Size:
      return !v->items.empty();
    case Type::Dict:
      return !v->dict.empty();
    case Type::DictKeys:
    case Type::DictValues:
    case Type::DictItems:
      return !viewedDict(*v)->dict.empty();
    case Type::Range:
      return rangeLength(*v) > 0;
    case Type::Tensor:
      return tensorTruth(v->tensor);
    default:
      return true;
  }
}

namespace {

long long intOf(const Value& v) {
  return v->type == Type::Int ? v->intValue : (long long)v->boolValue;
}

// An int against a float, exactly: the float's integer part (exact below 2^63) first, then its
// fraction.
std::optional<int> compareIntFloat(long long i, double f) {
  if (std::isnan(f)) return std::nullopt;
  if (f >= 9223372036854775808.0) return -1;
  if (f < -9223372036854775808.0) return 1;
  const double whole = std::trunc(f);
  const auto w = (long long)whole;
  if (i != w) return i < w ? -1 : 1;
  const double fraction = f - whole;
  return fraction > 0 ? -1 : fraction < 0 ? 1 : 0;
}

}  // namespace

std::optional<int> compareNumbers(const Value& a, const Value& b) {
  const bool af = a->type == Type::Float, bf = b->type == Type::Float;
  if (af && bf) {
    const double x = a->floatValue, y = b->floatValue;
    if (std::isnan(x) || std::isnan(y)) return std::nullopt;
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (af) {
    const std::optional<int> c = compareIntFloat(intOf(b), a->floatValue);
    return c ? std::optional<int>(-*c) : std::nullopt;
  }
  if (bf) return compareIntFloat(intOf(a), b->floatValue);
  const long long x = intOf(a), y = intOf(b);
  return x < y ? -1 : x > y ? 1 : 0;
}

namespace {

const char* const kInComparison =
    "in comparison: two values that contain themselves, or that nest lists, tuples or dicts too "
    "deeply (1000 levels at most), cannot be compared";

// How tensors compare: by identity as dict keys (a tensor hashes by its id), by their `==` where
// Python asks `a == b` (a list's ==, `in`, index).
enum class Tensors { ByIdentity, ByValue };

bool equalAs(const Value& a, const Value& b, Tensors tensors);

// How Python compares the items of two containers (PyObject_RichCompareBool): an object equals
// itself before anything else is asked, so `a == a` holds for `a = []; a.append(a)`, and
// `[x] == [x]` for x = float('nan').
bool sameOrEqual(const Value& a, const Value& b, Tensors tensors) {
  return a == b || equalAs(a, b, tensors);
}

// bool(a == b) with a tensor on either side: torch's elementwise `==` and its truth (one
// element's; more are the ambiguity error); anything but a tensor or a number is unequal.
bool tensorEquals(const Value& a, const Value& b) {
  const auto operand = [](const Value& v) { return v->type == Type::Tensor || isNumber(v); };
  if (!operand(a) || !operand(b)) return false;
  const at::Tensor& like = a->type == Type::Tensor ? a->tensor : b->tensor;
  const at::Tensor x = a->type == Type::Tensor ? a->tensor : operandTensor(a, like);
  const at::Tensor y = b->type == Type::Tensor ? b->tensor : operandTensor(b, like);
  return tensorTruth(x == y);
}

bool equalAs(const Value& a, const Value& b, Tensors tensors) {
  if (tensors == Tensors::ByValue && (a->type == Type::Tensor || b->type == Type::Tensor))
    return tensorEquals(a, b);
  if (isNumber(a) && isNumber(b)) {
    const std::optional<int> c = compareNumbers(a, b);
    return c && *c == 0;
  }
  const auto seq = [](const Value& v) { return v->type == Type::Tuple || v->type == Type::Size; };
  if ((seq(a) && seq(b)) || (a->type == Type::List && b->type == Type::List)) {
    if (a->items.size() != b->items.size()) return false;
    if (a->items.empty()) return true;
    NestingGuard nest(kInComparison);
    for (size_t i = 0; i < a->items.size(); ++i) {
      if (!sameOrEqual(a->items[i], b->items[i], tensors)) return false;
    }
    return true;
  }
  if (isDictView(a->type) && isDictView(b->type)) {
    NestingGuard nest(kInComparison);
    return viewsEqual(a, b);
  }
  if (a->type != b->type) return false;
  switch (a->type) {
    case Type::None:
      return true;
    case Type::Str:
      return a->str == b->str;
    case Type::Range: {  // as sequences: range(0) == range(2, 2), range(0, 3, 5) == range(1)
      const long long n = rangeLength(*a);
      if (n != rangeLength(*b)) return false;
      if (n == 0) return true;
      return a->rangeStart == b->rangeStart && (n == 1 || a->rangeStep == b->rangeStep);
    }
    case Type::Module:
    case Type::Device:
      return a->str == b->str;
    case Type::Namespace: {  // a dtype equals its aliases (torch.float == torch.float32)
      const auto x = builtin_args::asDtype(a), y = builtin_args::asDtype(b);
      return x ? x == y : a == b;
    }
    case Type::Dict: {  // as in Python, the order the keys were inserted in does not matter
      if (a->dict.size() != b->dict.size()) return false;
      if (a->dict.empty()) return true;
      NestingGuard nest(kInComparison);
      for (const auto& entry : a->dict) {
        const auto other = findKey(*b, entry.first);  // keys hash tensors by id
        if (other == b->dict.end() || !sameOrEqual(other->second, entry.second, tensors))
          return false;
      }
      return true;
    }
    default:
      return a == b;
  }
}

}  // namespace

bool equal(const Value& a, const Value& b) {
  return equalAs(a, b, Tensors::ByIdentity);
}

namespace {

void requireHashable(const Value& key) {
  switch (key->type) {
    case Type::List:
    case Type::Dict:
    case Type::DictKeys:  // not values(): it hashes by identity, as its equality is
    case Type::DictItems:
      throw RuntimeFailure(std::string("unhashable type: '") + typeName(key->type) + "'");
    case Type::Tuple:
      for (const Value& item : key->items) requireHashable(item);
      return;
    default:
      return;
  }
}

// A key's hash, alike for keys `equal` calls equal: numbers by value (1, 1.0 and True alike),
// tuples and sizes by their items, ranges as the sequences they walk, strings, modules and devices
// by their text, tensors and functions by identity; other keys (dtypes, which equal their aliases,
// dict views) all hash alike, and `equal` tells them apart.
size_t hashAt(const Value& k, int depth) {
  const auto number = [](long long v) { return std::hash<long long>{}(v); };
  const auto mix = [](size_t h, size_t x) { return (h ^ x) * 0x100000001b3ull; };
  switch (k->type) {
    case Type::Bool:
      return number(k->boolValue);
    case Type::Int:
      return number(k->intValue);
    case Type::Float: {
      const double x = k->floatValue;
      if (std::isnan(x)) return 0x7ff8;
      // every integral double in [-2^63, 2^63) is a long long, which it equals
      if (x == std::floor(x) && x >= -9223372036854775808.0 && x < 9223372036854775808.0)
        return number((long long)x);
      return std::hash<double>{}(x);
    }
    case Type::Str:
    case Type::Module:
    case Type::Device:
      return std::hash<std::string>{}(k->str);
    case Type::Tuple:
    case Type::Size: {  // past 32 levels alike: `equal` tells deeper tuples apart
      if (depth >= 32) return 0x7475706c65;
      size_t h = 0xcbf29ce484222325ull;
      for (const Value& item : k->items) h = mix(h, hashAt(item, depth + 1));
      return h;
    }
    case Type::Range: {
      const long long n = rangeLength(*k);
      if (n == 0) return 0x52;
      return mix(mix(number(k->rangeStart), number(n)), number(n == 1 ? 0 : k->rangeStep));
    }
    case Type::Tensor:
    case Type::Deferred:  // resolved in place into its tensor: the same object, the same hash
    case Type::Function:
    case Type::Builtin:
      return std::hash<const Object*>{}(k.get());
    default:
      return size_t(k->type);
  }
}

size_t keyHash(const Value& k) {
  return hashAt(k, 0);
}

// Past this many entries a lookup goes through the dict's index; below it a walk is as quick.
constexpr size_t kIndexedFrom = 16;

}  // namespace

void eraseEntry(Object& d, DictEntries::iterator entry) {
  d.dictIndex.erase(d.dict, d.keyEdits, size_t(entry - d.dict.begin()), keyHash);
  d.dict.erase(entry);
  ++d.keyEdits;
}

void clearEntries(Object& d) {
  if (!d.dict.empty()) ++d.keyEdits;
  d.dict.clear();
  d.dictIndex.clear();
}

DictEntries::iterator findKey(Object& d, const Value& key) {
  requireHashable(key);
  // The same object first, as CPython's lookup: a NaN key finds itself
  const auto same = [&](const Value& k) { return k == key || equal(k, key); };
  if (d.dict.size() < kIndexedFrom)
    return std::find_if(d.dict.begin(), d.dict.end(),
                        [&](const auto& kv) { return same(kv.first); });
  const size_t at = d.dictIndex.find(d.dict, d.keyEdits, keyHash(key), same, keyHash);
  return d.dict.begin() + std::ptrdiff_t(at);
}

bool pythonEquals(const Value& a, const Value& b) {
  return equalAs(a, b, Tensors::ByValue);  // no identity first: `nan == nan` is False
}

}  // namespace shardscope::trace
