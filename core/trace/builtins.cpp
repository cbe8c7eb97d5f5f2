// Python builtins available to trace scripts (the torch namespace: torch_functions.cpp; tensor
// methods: tensor_methods.cpp). This is the documented list (docs/trace-language.md); anything else
// is an error that says so.
#include <ATen/ATen.h>
#include <torch/version.h>

#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <vector>

#include "../error.h"
#include "../model/tokenizer.h"
#include "builtin_args.h"
#include "dict_view.h"
#include "interpreter.h"
#include "python_numbers.h"
#include "trace_device.h"

namespace shardscope::trace {

using namespace builtin_args;

std::string dtypeRepr(at::ScalarType t) {
  return dtypeValue(t)->str;
}

at::Tensor operandTensor(const Value& v, const at::Tensor& like) {
  at::Tensor t;
  switch (v->type) {
    case Type::Bool:
      t = at::scalar_tensor(v->boolValue, at::kBool);
      break;
    case Type::Int:
      t = at::scalar_tensor(c10::Scalar(int64_t(v->intValue)), at::kLong);
      break;
    case Type::Float:
      t = at::scalar_tensor(v->floatValue, at::kDouble);
      break;
    default:
      return toTensor(v, &like);
  }
  t.unsafeGetTensorImpl()->set_wrapped_number(true);
  return t;
}

at::Tensor toTensor(const Value& v, const at::Tensor* like) {
  const auto opts = like ? like->options() : at::TensorOptions().device(currentDevice());
  switch (v->type) {
    case Type::Tensor:
      return v->tensor;
    case Type::Bool:
      return at::scalar_tensor(v->boolValue, like ? opts : opts.dtype(at::kBool));
    case Type::Int:
      return at::scalar_tensor(double(v->intValue), like ? opts : opts.dtype(at::kLong));
    case Type::Float:
      return at::scalar_tensor(v->floatValue, like ? opts : opts.dtype(at::kFloat));
    case Type::Tuple:
    case Type::List:
    case Type::Size: {
      if (v->items.empty()) return at::empty({0}, opts.dtype(at::kFloat));
      NestingGuard nest(
          "while converting a list to a tensor: a list that contains itself, or nests too deeply "
          "(1000 levels at most), has no tensor");
      std::vector<at::Tensor> parts;
      bool anyFloat = false;
      for (const auto& i : v->items) {
        parts.push_back(toTensor(i, nullptr).to(currentDevice()));
        anyFloat |= at::isFloatingType(parts.back().scalar_type());
      }
      at::Tensor t = at::stack(parts);
      if (anyFloat) t = t.to(at::kFloat);
      return like ? t.to(like->options()) : t;
    }
    default:
      throw RuntimeFailure(std::string("cannot convert ") + typeName(v->type) + " to a tensor");
  }
}

std::vector<at::indexing::TensorIndex> tensorIndices(const Value& index) {
  using namespace at::indexing;
  std::vector<TensorIndex> out;
  const auto one = [&](const Value& v) {
    switch (v->type) {
      case Type::Int:
        out.emplace_back(asInt(v, "index"));
        break;
      case Type::Bool:  // torch's: a new dim of 1 (True) or 0 (False) entries, not row 1 or 0
        out.emplace_back(v->boolValue);
        break;
      case Type::None:
        out.emplace_back(None);
        break;
      case Type::Ellipsis:
        out.emplace_back(Ellipsis);
        break;
      case Type::Slice: {
#if TORCH_VERSION_MAJOR >= 2
        using Bound = c10::SymInt;
#else
        using Bound = int64_t;
#endif
        const auto part = [](const Value& p) -> c10::optional<Bound> {
          if (p->type == Type::None) return c10::nullopt;
          return Bound(asInt(p, "slice index"));
        };
        out.emplace_back(Slice(part(v->items[0]), part(v->items[1]), part(v->items[2])));
        break;
      }
      case Type::Tensor:
        out.emplace_back(v->tensor);
        break;
      case Type::List:
        out.emplace_back(toTensor(v));
        break;
      default:
        throw RuntimeFailure(std::string("a tensor cannot be indexed with ") + typeName(v->type));
    }
  };
  if (index->type == Type::Tuple) {
    for (const auto& v : index->items) one(v);
  } else {
    one(index);
  }
  // t[()] (or t[*[]]) is the whole tensor, as t[...] is: LibTorch refuses an empty index list
  if (out.empty()) out.emplace_back(Ellipsis);
  return out;
}

namespace {

// snapshot() with the copies made so far: a value met twice (two names of one list, a list that
// holds itself) is copied once, so the copies alias as the originals do.
Value snapshotOf(const Value& v, std::unordered_map<const Object*, Value>& copies) {
  if (const auto it = copies.find(v.get()); it != copies.end()) return it->second;
  const char* const during =
      "while copying a saved value: it nests lists, tuples or dicts too deeply (1000 levels at "
      "most)";
  switch (v->type) {
    case Type::Tensor:
      return copies[v.get()] = tensor(v->tensor.clone());
    case Type::Deferred:  // to be computed into memory of its own: the block resolves this object
      return v;
    case Type::Tuple:
    case Type::List: {
      NestingGuard nest(during);
      Value copy = v->type == Type::List ? list({}) : tuple({});
      copy->str = v->str;  // a named tuple's type and fields
      copy->fields = v->fields;
      copies[v.get()] = copy;  // before the items: one may be this value itself
      copy->items.reserve(v->items.size());
      for (const auto& i : v->items) copy->items.push_back(snapshotOf(i, copies));
      return copy;
    }
    case Type::Dict: {
      NestingGuard nest(during);
      auto copy = std::make_shared<Object>(*v);
      copies[v.get()] = copy;
      for (auto& kv : copy->dict) kv.second = snapshotOf(kv.second, copies);
      return copy;
    }
    case Type::DictKeys:
    case Type::DictValues:
    case Type::DictItems: {
      NestingGuard nest(during);
      Value copy = dictView(v->type, nullptr);
      copies[v.get()] = copy;
      copy->items[0] = snapshotOf(viewedDict(*v), copies);
      return copy;
    }
    default:
      return copies[v.get()] = std::make_shared<Object>(*v);
  }
}

}  // namespace

Value snapshot(const Value& v) {
  std::unordered_map<const Object*, Value> copies;
  return snapshotOf(v, copies);
}

// What iterating `v` gives, as a `for` loop sees it (the items of a sequence, a dict's keys, a
// string's characters, a tensor's rows): shared by the builtins that take an iterable, unpacking
// and str.join.
std::vector<Value> elementsOf(const Value& v, Interpreter& in) {
  // The values it makes are asked of the budget first: list(range(10**9)) made them all.
  if (v->type == Type::Range) {
    const long long n = rangeLength(*v);
    in.requestMemory(newValuesBytes(n));
    std::vector<Value> out;
    for (long long k = 0; k < n; ++k) out.push_back(integer(v->rangeStart + k * v->rangeStep));
    return out;
  }
  if (v->type == Type::Tensor) {
    in.requestMemory(newValuesBytes(v->tensor.size(0)));
    std::vector<Value> out;
    for (int64_t i = 0; i < v->tensor.size(0); ++i) out.push_back(tensor(v->tensor[i]));
    return out;
  }
  if (v->type == Type::Dict) {
    std::vector<Value> out;
    for (const auto& kv : v->dict) out.push_back(kv.first);
    return out;
  }
  if (isDictView(v->type)) return viewElements(*v);
  if (v->type == Type::Str) {
    in.requestMemory(newValuesBytes(int64_t(v->str.size())));
    std::vector<Value> out;
    for (char c : v->str) out.push_back(string(std::string(1, c)));
    return out;
  }
  if (!isIterable(v))
    throw RuntimeFailure(std::string("'") + typeName(v->type) + "' object is not iterable");
  return v->items;
}

bool isIterable(const Value& v) {
  switch (v->type) {
    case Type::Range:
    case Type::Dict:
    case Type::DictKeys:
    case Type::DictValues:
    case Type::DictItems:
    case Type::Str:
    case Type::Tuple:
    case Type::List:
    case Type::Size:
      return true;
    case Type::Tensor:
      return v->tensor.dim() > 0;
    default:
      return false;
  }
}

namespace {

// Calls `visit` with each item of `items` as a for loop sees it, until it returns true: a range's
// ints made one at a time (sum(range(10 ** 9)) and any(range(10 ** 9)) hold no list of them),
// anything else's through elementsOf.
template <typename Visit>
void visitItems(Interpreter& in, const Value& items, Visit visit) {
  if (items->type != Type::Range) {
    for (const Value& v : elementsOf(items, in)) {
      if (visit(v)) return;
    }
    return;
  }
  const Object& r = *items;
  for (long long k = 0, n = rangeLength(r); k < n; ++k) {
    in.tick();
    if (visit(integer(r.rangeStart + k * r.rangeStep))) return;
  }
}

}  // namespace

namespace {

void installBuiltins(Environment& env);

// print(), through the calling interpreter's Host::print (the runner's output on the driver; rank
// 0's report in a trace block), so one print serves both, and the driver's print reached in a
// block (a driver function's default `out=print`) prints as the block's does, once.
Value printBuiltin() {
  return strictBuiltin("print", kVarargs, {"sep", "end"}, [](Args& a) {
    // Output is kept as lines (RunResult::printed): a line is ended by print itself.
    if (const Value* end = a.keyword("end"); end && str(*end) != "\n")
      throw RuntimeFailure(
          "print(end=...) other than a newline is not supported in trace scripts: build the "
          "line first (an f-string, or str.join) and print it once");
    std::string line;
    const Value* sep = a.keyword("sep");
    for (size_t i = 0; i < a.positional.size(); ++i)
      line += (i ? (sep ? str(*sep) : " ") : "") + str(a.positional[i]);
    SS_ASSERT(a.interpreter, "print() called other than through Interpreter::call");
    a.interpreter->host().print(line);
    return none();
  });
}

}  // namespace

Value tokenizerValue(std::shared_ptr<const Tokenizer> tok) {
  auto ns = std::make_shared<Object>();
  ns->type = Type::Namespace;
  ns->str = "tokenizer";
  ns->attributes["decode"] = builtin("decode", [tok](Args& a) {
    const Value& v = a.required(0);
    std::vector<int64_t> ids;
    if (v->type == Type::Tensor) {
      at::Tensor t = v->tensor.to(at::kCPU, at::kLong).flatten();
      ids.assign(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + t.numel());
    } else if (v->type == Type::Int) {
      ids.push_back(v->intValue);
    } else {
      for (const auto& i : v->items) ids.push_back(asInt(i, "token id"));
    }
    return string(tok->decode(ids));
  });
  ns->attributes["encode"] = builtin("encode", [tok](Args& a) {
    std::vector<Value> ids;
    for (int64_t id : tok->encode(str(a.required(0)))) ids.push_back(integer(id));
    return list(ids);
  });
  return ns;
}

const std::shared_ptr<Environment>& builtinScope() {
  static const std::shared_ptr<Environment> scope = [] {
    auto env = std::make_shared<Environment>();
    installBuiltins(*env);
    env->set("print", printBuiltin());
    return env;
  }();
  return scope;
}

namespace {

// The key= of sorted, max and min: key(v) for each value (the values themselves without one).
std::vector<Value> keysOf(const Args& a, const std::vector<Value>& vs) {
  const Value* key = a.keyword("key");
  if (!key || (*key)->type == Type::None) return vs;
  Interpreter& in = interpreterOf(a);
  std::vector<Value> keys;
  keys.reserve(vs.size());
  for (const Value& v : vs) {
    CallArgs call;
    call.positional = {v};
    call.at = a.at;
    keys.push_back(in.call(*key, call));
  }
  return keys;
}

}  // namespace

std::vector<Value> sortedByKey(const CallArgs& a, const std::vector<Value>& vs) {
  const std::vector<Value> keys = keysOf(a, vs);
  Interpreter& in = interpreterOf(a);
  // Python's reverse=True keeps equal keys in their order: sort descending, stably.
  const Value* rev = a.keyword("reverse");
  const bool descending = rev && truthy(*rev);
  std::vector<size_t> order(vs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    return descending ? in.less(keys[y], keys[x]) : in.less(keys[x], keys[y]);
  });
  std::vector<Value> sorted;
  for (size_t i : order) sorted.push_back(vs[i]);
  return sorted;
}

namespace {

// len, range, the conversions (repr, str, bool, int, float) and abs.
void installScalarsAndConversions(Environment& env) {
  env.set("len", strictBuiltin("len", Takes{1, {"obj"}, 1, 1, Arity::ExactlyOne}, [](Args& a) {
            const Value v = arg(a, 0, "obj", "len");
            switch (v->type) {
              case Type::Str:
                return integer((long long)v->str.size());
              case Type::Tuple:
              case Type::List:
              case Type::Size:
                return integer((long long)v->items.size());
              case Type::Dict:
                return integer((long long)v->dict.size());
              case Type::DictKeys:
              case Type::DictValues:
              case Type::DictItems:
                return integer((long long)viewedDict(*v)->dict.size());
              case Type::Range:
                return integer(rangeLength(*v));
              case Type::Tensor:
                return integer(v->tensor.dim() ? v->tensor.size(0)
                                               : throw RuntimeFailure("len() of a 0-d tensor"));
              case Type::Module:  // len(model.model.layers)
                if (a.interpreter) {
                  if (auto n = a.interpreter->host().moduleLength(*a.interpreter, v))
                    return integer(*n);
                }
                throw RuntimeFailure(v->str +
                                     " is not a list of modules, so it has no len(); a list of "
                                     "modules such as model.model.layers has one");
              default:
                throw RuntimeFailure(std::string("object of type '") + typeName(v->type) +
                                     "' has no len()");
            }
          }));
  env.set("range",
          strictBuiltin("range", Takes{3, {"start", "stop"}, 1, 2, Arity::Expected}, [](Args& a) {
            auto r = std::make_shared<Object>();
            r->type = Type::Range;
            if (a.positional.size() == 1) {
              r->rangeStop = asInt(a.positional[0], "range stop");
            } else {
              r->rangeStart = asInt(arg(a, 0, "start", "range"), "range start");
              r->rangeStop = asInt(arg(a, 1, "stop", "range"), "range stop");
              if (a.positional.size() > 2) r->rangeStep = asInt(a.positional[2], "range step");
              if (r->rangeStep == 0) throw RuntimeFailure("range() step must not be zero");
            }
            return Value(r);
          }));
  env.set("ascii", strictBuiltin("ascii", Takes{1, {"obj"}, 1, 1, Arity::ExactlyOne},
                                 [](Args& a) { return string(ascii(arg(a, 0, "obj", "ascii"))); }));
  env.set("repr", strictBuiltin("repr", Takes{1, {"obj"}, 1, 1, Arity::ExactlyOne},
                                [](Args& a) { return string(repr(arg(a, 0, "obj", "repr"))); }));
  env.set("str", strictBuiltin("str", 1, {}, [](Args& a) {
            return string(a.positional.empty() ? "" : str(a.positional[0]));
          }));
  env.set("bool", strictBuiltin("bool", Takes{1, {"x"}, 0, 1, Arity::Expected}, [](Args& a) {
            return boolean(!a.positional.empty() && truthy(a.positional[0]));
          }));
  // Python's int takes `base` by keyword too; here it is refused, as no parse in another base is.
  env.set("int", strictBuiltin("int", Takes{1, {"x", "base"}, 0, 1}, [](Args& a) {
            if (a.keyword("base"))
              throw RuntimeFailure(
                  "int() got an unexpected keyword argument 'base'; int(text, base) is not "
                  "supported in trace scripts: parse the digits yourself, or write the number");
            if (a.positional.empty() && a.keywords.empty()) return integer(0);  // int() is 0
            const Value v = arg(a, 0, "x", "int");
            if (v->type == Type::Str) return integer(intFromText(v->str));
            if (v->type == Type::Float ||
                (v->type == Type::Tensor && at::isFloatingType(v->tensor.scalar_type()))) {
              return integer(floatToInt(std::trunc(asNumber(v, "x")), "int"));
            }
            return integer(asInt(v, "x"));
          }));
  env.set("float", strictBuiltin("float", Takes{1, {"x"}, 0, 1, Arity::Expected}, [](Args& a) {
            if (a.positional.empty() && a.keywords.empty()) return floating(0);  // float() is 0.0
            const Value v = arg(a, 0, "x", "float");
            if (v->type == Type::Str) return floating(floatFromText(v->str));
            return floating(asNumber(v, "x"));
          }));
  env.set("abs", strictBuiltin("abs", Takes{1, {"x"}, 1, 1, Arity::ExactlyOne}, [](Args& a) {
            const Value v = arg(a, 0, "x", "abs");
            if (v->type == Type::Tensor) return tensor(v->tensor.abs());
            if (v->type == Type::Float) return floating(std::abs(v->floatValue));
            // The smallest int is its own llabs: an error, as any result past 64 bits.
            return interpreterOf(a).binary(BinaryOp::Mul, v, integer(asInt(v, "x") < 0 ? -1 : 1));
          }));
}

// divmod, the containers (tuple, list, dict, enumerate, zip, sorted) and the reductions (sum, max,
// min, round; isinstance says it is not supported).
void installContainersAndReductions(Environment& env) {
  env.set("divmod",
          strictBuiltin("divmod", Takes{2, {"a", "b"}, 2, 2, Arity::Expected}, [](Args& a) {
            // The script's own // and %: ints and floats round as Python's do.
            const Value x = arg(a, 0, "a", "divmod"), y = arg(a, 1, "b", "divmod");
            return tuple({interpreterOf(a).binary(BinaryOp::FloorDiv, x, y),
                          interpreterOf(a).binary(BinaryOp::Mod, x, y)});
          }));
  env.set("tuple",
          strictBuiltin("tuple", Takes{1, {"iterable"}, 0, 1, Arity::Expected}, [](Args& a) {
            return tuple(a.positional.empty() ? std::vector<Value>{}
                                              : elementsOf(a.positional[0], interpreterOf(a)));
          }));
  env.set("list", strictBuiltin("list", Takes{1, {"iterable"}, 0, 1, Arity::Expected}, [](Args& a) {
            return list(a.positional.empty() ? std::vector<Value>{}
                                             : elementsOf(a.positional[0], interpreterOf(a)));
          }));
  // dict(), dict(mapping or pairs), dict(..., key=value): an empty dict, updated as
  // dict.update() does it.
  env.set("dict", builtin("dict", [](Args& a) {
            if (a.positional.size() > 1)
              throw RuntimeFailure("dict expected at most 1 argument, got " +
                                   std::to_string(a.positional.size()));
            Value d = dict();
            Interpreter& in = interpreterOf(a);
            in.call(in.getAttr(d, "update"), a);
            return d;
          }));
  env.set("enumerate", strictBuiltin("enumerate", 2, {"iterable", "start"}, [](Args& a) {
            std::vector<Value> out;
            long long i = asInt(optional(a, 1, "start", integer(0)), "start");
            for (const auto& v : elementsOf(arg(a, 0, "iterable", "enumerate"), interpreterOf(a)))
              out.push_back(tuple({integer(i++), v}));
            return list(out);
          }));
  env.set("zip", strictBuiltin("zip", kVarargs, {}, [](Args& a) {
            std::vector<std::vector<Value>> seqs;
            size_t n = SIZE_MAX;
            for (const auto& p : a.positional) {
              seqs.push_back(elementsOf(p, interpreterOf(a)));
              n = std::min(n, seqs.back().size());
            }
            std::vector<Value> out;
            for (size_t i = 0; i < (seqs.empty() ? 0 : n); ++i) {
              std::vector<Value> t;
              for (const auto& s : seqs) t.push_back(s[i]);
              out.push_back(tuple(t));
            }
            return list(out);
          }));
  env.set("sum", strictBuiltin("sum", Takes{2, {"iterable", "start"}, 1, 1}, [](Args& a) {
            // The script's `+` from the left, as Python's sum: ints that overflow fail, lists and
            // tuples concatenate (`sum(rows, [])`), tensors promote as torch does.
            Value acc = optional(a, 1, "start", integer(0));
            if (acc->type == Type::Str)
              throw RuntimeFailure("sum() can't sum strings [use ''.join(seq) instead]");
            Interpreter& in = interpreterOf(a);
            visitItems(in, arg(a, 0, "iterable", "sum"), [&](const Value& v) {
              acc = in.binary(BinaryOp::Add, acc, v);
              return false;
            });
            return acc;
          }));
  // any(iterable) and all(iterable): the first item that decides, by its truth as `if` reads it
  // (a tensor of one element; more are ambiguous, as in torch), a range's ints made up to it.
  const auto truthOfItems = [](bool wantAny) {
    return [wantAny](Args& a) {
      Interpreter& in = interpreterOf(a);
      bool decided = false;
      visitItems(in, arg(a, 0, "iterable", wantAny ? "any" : "all"), [&](const Value& v) {
        in.force(v);
        return decided = truthy(v) == wantAny;
      });
      return boolean(decided ? wantAny : !wantAny);
    };
  };
  env.set("any", strictBuiltin("any", 1, {}, truthOfItems(true)));
  env.set("all", strictBuiltin("all", 1, {}, truthOfItems(false)));
  // Ordered as the script's `<` orders (strings and tuples too) the values' keys (key=, else the
  // values); the first of equal keys wins; default= for an empty iterable, as Python's.
  const auto extreme = [](bool wantMax) {
    return [wantMax](Args& a) {
      const char* fn = wantMax ? "max" : "min";
      const bool one = a.positional.size() == 1;
      std::vector<Value> vs = one ? elementsOf(a.positional[0], interpreterOf(a)) : a.positional;
      const Value* dflt = a.keyword("default");
      if (dflt && !one)
        throw RuntimeFailure(std::string("Cannot specify a default for ") + fn +
                             "() with multiple positional arguments");
      if (vs.empty() && dflt) return *dflt;
      if (vs.empty()) throw RuntimeFailure(std::string(fn) + "() arg is an empty sequence");
      Interpreter& in = interpreterOf(a);
      const std::vector<Value> keys = keysOf(a, vs);
      size_t best = 0;
      for (size_t i = 1; i < vs.size(); ++i) {
        if (wantMax ? in.less(keys[best], keys[i]) : in.less(keys[i], keys[best])) best = i;
      }
      return vs[best];
    };
  };
  // At least one positional, counted before the keywords are read (max(foo=1) is a count error).
  const Takes takesExtreme{kVarargs, {"key", "default"}, 1, 0, Arity::Expected};
  env.set("max", strictBuiltin("max", takesExtreme, extreme(true)));
  env.set("min", strictBuiltin("min", takesExtreme, extreme(false)));
  env.set("sorted",
          strictBuiltin("sorted", Takes{1, {"iterable", "key", "reverse"}, 1, 1, Arity::Expected},
                        [](Args& a) {
                          return list(sortedByKey(
                              a, elementsOf(arg(a, 0, "iterable", "sorted"), interpreterOf(a))));
                        }));
  env.set("round", strictBuiltin("round", 2, {"number", "ndigits"}, [](Args& a) {
            const Value x = arg(a, 0, "number", "round");
            const Value* ndigits = a.get(1, "ndigits");
            const bool toInt = !ndigits || (*ndigits)->type == Type::None;
            if (x->type == Type::Int || x->type == Type::Bool)
              return roundInt(asInt(x, "number"), toInt ? 0 : asInt(*ndigits, "ndigits"));
            if (toInt) return integer(floatToInt(std::nearbyint(asNumber(x, "number")), "round"));
            return floating(roundFloat(asNumber(x, "number"), asInt(*ndigits, "ndigits")));
          }));
  env.set("isinstance", builtin("isinstance", [](Args&) -> Value {
            throw RuntimeFailure("isinstance() is not supported in trace scripts");
          }));
}

void installBuiltins(Environment& env) {
  env.set("__name__", string("__main__"));
  installScalarsAndConversions(env);
  installContainersAndReductions(env);
  // These are Python's classes, and print as classes (<class 'list'>)
  for (const char* name :
       {"int", "float", "str", "bool", "tuple", "list", "dict", "range", "enumerate", "zip"})
    (*env.find(name))->pythonClass = true;
  env.set("torch", torchNamespace());
}

}  // namespace

}  // namespace shardscope::trace
