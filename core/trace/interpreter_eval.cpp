// Interpreter, expressions: evaluating expressions, calls, `.save()` and f-string fields (the
// operators: interpreter_operators.cpp).
#include "builtin_args.h"
#include "dict_view.h"
#include "format_spec.h"
#include "interpreter.h"
#include "python_numbers.h"
#include "result_sizes.h"

#include <climits>
#include <cmath>
#include <optional>
#include <utility>

namespace shardscope::trace {

Value Interpreter::eval(const Expr& e) {
  Value v = evalLazy(e);
  force(v);
  return v;
}

Value Interpreter::evalLazy(const Expr& e) {
  tick();
  switch (e.kind) {
    case ExprKind::Name: {
      Value* v = env_->find(e.text);
      if (!v) {
        at_ = e.at;
        const std::string why = deleted_.count(e.text) ? "" : host_.undefinedName(e.text);
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
        const Value v = eval(*e.items[i]);  // before its spec's fields, as Python
        const ExprPtr& spec = e.values[i];
        out += formatValue(v, spec ? e.formats[i] + ":" + eval(*spec)->str : e.formats[i])->str;
        out += e.names[i + 1];
      }
      return charged(string(out));
    }
    case ExprKind::Tuple:
    case ExprKind::List: {
      std::vector<Value> items;
      for (const auto& i : e.items) {
        if (i->kind != ExprKind::Starred) {
          items.push_back(eval(*i));
          continue;
        }
        const std::vector<Value> unpacked = starredItems(*i, "Value after *");  // [*a, *b]
        items.insert(items.end(), unpacked.begin(), unpacked.end());
      }
      return e.kind == ExprKind::Tuple ? tuple(std::move(items)) : list(std::move(items));
    }
    case ExprKind::Dict: {
      Value d = dict();
      for (size_t i = 0; i < e.items.size(); ++i) {
        if (!e.items[i]) {  // {**other}
          const Value other = eval(*e.values[i]);
          if (other->type != Type::Dict)
            fail(std::string("'") + typeName(other->type) + "' object is not a mapping");
          chargeMemory(int64_t(other->dict.size() * 2 * sizeof(Value)));
          for (const auto& [k, v] : other->dict) setItem(d, k, v);
          continue;
        }
        Value key = eval(*e.items[i]);  // before its value, as Python does
        setItem(d, key, eval(*e.values[i]));
      }
      return d;
    }
    case ExprKind::Starred:  // the parser places one only where its items are taken
      fail("can't use starred expression here");
    case ExprKind::Attribute:
      return getAttr(evalLazy(*e.a), e.text);
    case ExprKind::Subscript: {
      Value obj = evalLazy(*e.a);  // a C++ call's arguments have no order: Python's is left first
      return getItem(obj, eval(*e.b));
    }
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
      if (e.unaryOp == UnaryOp::Not) return boolean(!truthy(v));
      if (v->type == Type::Tensor) {
        if (e.unaryOp == UnaryOp::Pos) return v;
        // A copy of every element, as x.neg() asks (-x.expand(n, n) makes n * n).
        requestMemory(tensorBytes(v->tensor.sizes(), v->tensor.scalar_type()));
        return charged(tensor(e.unaryOp == UnaryOp::Neg ? -v->tensor : ~v->tensor));
      }
      if (e.unaryOp == UnaryOp::Neg)
        return v->type == Type::Float
                   ? floating(-v->floatValue)
                   : integer(checkedInt(0, asInt(v, "operand of -"), BinaryOp::Sub));
      if (e.unaryOp == UnaryOp::Invert) return integer(~asInt(v, "operand of ~"));
      if (!isNumber(v)) fail(std::string("bad operand type for unary +: ") + typeName(v->type));
      return v;
    }
    case ExprKind::Binary: {
      Value a = eval(*e.a);  // `f() + [len(log)]` ran the right operand first (g++)
      return binary(e.binaryOp, a, eval(*e.b));
    }
    case ExprKind::Compare: {
      Value left = eval(*e.items[0]);
      Value result = boolean(true);
      for (size_t i = 0; i < e.compareOps.size(); ++i) {
        Value right = eval(*e.items[i + 1]);
        result = compare(e.compareOps[i], left, right);
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
    case ExprKind::Comprehension: {  // as Python: a function of the first iterable, called here
      CallArgs first;
      first.positional.push_back(eval(*e.a));
      return call(makeFunction(e.text, e.params, e.body, nullptr), first);
    }
  }
  fail("unsupported expression");
}

bool Interpreter::holdsModelMemory(const Value& v) const {
  return anyInside(v, [this](const Value& x) {
    return x->type == Type::Tensor && host_.viewsModelMemory(x->tensor);
  });
}

// TRACE section 6: `.save()` returns its receiver and marks it; a value that views model memory
// is copied at once (later kernels reuse that memory). A bare `x.save()` marks the name `x`.
Value Interpreter::save(const Expr& receiverExpr) {
  Value receiver = evalLazy(receiverExpr);
  if (receiver->type == Type::Deferred) {  // computed later, into memory of its own
    receiver->saved = true;
    return receiver;
  }
  if (receiver->type == Type::Module)
    fail("a module cannot be saved; save one of its ports (.output, .input)");
  if (receiver->type == Type::Function || receiver->type == Type::Builtin)
    fail(
        "a function cannot be saved: one made in a block closes over the block's values, which "
        "end with it; save what it returns");
  Value saved;
  switch (receiver->type) {
    case Type::Tensor:
    case Type::List:
    case Type::Tuple:
    case Type::Dict:
    case Type::DictKeys:
    case Type::DictValues:
    case Type::DictItems:
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

namespace {

// How Python names a callee in the errors of a call's unpacking: "__main__.g.<locals>.f()",
// "print()".
std::string calleeName(const Value& fn) {
  if (fn->type == Type::Function) return "__main__." + fn->function->qualifiedName + "()";
  if (fn->type == Type::Builtin) return fn->str + "()";
  return std::string("'") + typeName(fn->type) + "' object";
}

}  // namespace

// A keyword argument, refused when the call has it already (`f(a=1, **{"a": 2})`).
void Interpreter::addKeyword(CallArgs& args, const std::string& callee, const std::string& name,
                             Value v) {
  for (const auto& [k, unused] : args.keywords) {
    if (k == name) fail(callee + " got multiple values for keyword argument '" + name + "'");
  }
  args.keywords.emplace_back(name, std::move(v));
}

Value Interpreter::evalCall(const Expr& e) {
  // `x.save()` is handled here so that saving works on every kind of value.
  if (e.a->kind == ExprKind::Attribute && e.a->text == "save" && e.items.empty()) {
    return save(*e.a->a);
  }
  Value fn = eval(*e.a);
  CallArgs args = evalArguments(e, calleeName(fn));
  return call(fn, args);
}

CallArgs Interpreter::evalArguments(const Expr& e, const std::string& callee) {
  CallArgs args;
  args.at = e.at;
  // Arguments may stay deferred: call() computes them unless the callee keeps them as they are.
  for (const auto& a : e.items) {
    if (a->kind != ExprKind::Starred) {
      args.positional.push_back(evalLazy(*a));
      continue;
    }
    const std::vector<Value> items = starredItems(*a, callee + " argument after *");
    args.positional.insert(args.positional.end(), items.begin(), items.end());
  }
  for (size_t i = 0; i < e.names.size(); ++i) {
    if (e.names[i] != "**") {
      addKeyword(args, callee, e.names[i], evalLazy(*e.values[i]));
      continue;
    }
    const Value mapping = eval(*e.values[i]);  // f(**kwargs)
    if (mapping->type != Type::Dict)
      fail(callee + " argument after ** must be a mapping, not " + typeName(mapping->type));
    chargeMemory(int64_t(mapping->dict.size() * 2 * sizeof(Value)));
    for (const auto& [k, v] : mapping->dict) {
      if (k->type != Type::Str) fail("keywords must be strings");
      addKeyword(args, callee, k->str, v);
    }
  }
  return args;
}

// What `*iterable` stands for in a display or a call (`what`: who names it in the error), asked
// of the budget first: the display or call holds a reference to each.
std::vector<Value> Interpreter::starredItems(const Expr& starred, const std::string& what) {
  const Value iterable = eval(*starred.a);
  if (!isIterable(iterable)) fail(what + " must be an iterable, not " + typeName(iterable->type));
  std::vector<Value> items = elementsOf(iterable, *this);
  chargeMemory(int64_t(items.size() * sizeof(Value)));
  return items;
}

Value Interpreter::formatValue(const Value& v, const std::string& format) {
  // `format` is what followed the expression in its field: "", "!r", "!s", ":spec" or "!r:spec".
  std::string spec = format;
  Value value = v;
  if (!spec.empty() && spec[0] == '!') {
    const std::string conversion = spec.substr(0, 2);
    if (conversion != "!r" && conversion != "!s" && conversion != "!a")
      fail("f-string: invalid conversion character: expected 's', 'r', or 'a'");
    value = string(conversion == "!s" ? str(v) : conversion == "!r" ? repr(v) : ascii(v));
    spec = spec.substr(2);
    if (!spec.empty() && spec[0] != ':')
      fail("f-string field: expected ':' or '}' after '" + conversion + "', got '" + spec + "'");
  }
  if (!spec.empty()) spec = spec.substr(1);  // the ':'
  // A 0-d tensor formats as its element, as torch's Tensor.__format__ does: f"{x}" is
  // "3.141590118408203", where print(x) shows "tensor(3.1416)".
  if (value->type == Type::Tensor && value->tensor.dim() == 0)
    value = builtin_args::fromTensorList(value->tensor);
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
