// Interpreter, expressions: evaluating expressions, operators (arithmetic and comparison), calls,
// `.save()` and f-string fields.
#include "builtin_args.h"
#include "dict_view.h"
#include "format_spec.h"
#include "interpreter.h"
#include "result_sizes.h"

#include <climits>
#include <cmath>
#include <optional>
#include <utility>

namespace shardscope::trace {
namespace {

// A list, tuple or torch.Size of `items`, as `kind` says; a Size holds only ints, as torch's.
Value sequenceLike(Type kind, std::vector<Value> items) {
  if (kind == Type::List) return list(std::move(items));
  Value t = tuple(std::move(items));
  if (kind != Type::Size) return t;
  for (size_t i = 0; i < t->items.size(); ++i)
    if (t->items[i]->type != Type::Int)
      throw RuntimeFailure("torch.Size() takes an iterable of 'int' (item " + std::to_string(i) +
                           " is '" + typeName(t->items[i]->type) + "')");
  t->type = Type::Size;
  return t;
}

// What `x op y` on tensors will allocate: matmul's shape, else the broadcast in the promoted dtype
// (true division of integers gives float32).
int64_t tensorResultBytes(BinaryOp op, const at::Tensor& x, const at::Tensor& y) {
  if (op == BinaryOp::MatMul) return matmulBytes(x, y);
  at::ScalarType dtype = at::result_type(x, y);
  if (op == BinaryOp::Div && !at::isFloatingType(dtype) && !at::isComplexType(dtype))
    dtype = at::kFloat;
  return broadcastBytes(x, y, dtype);
}

long long checkedInt(long long a, long long b, BinaryOp op) {
  long long r = 0;
  bool overflow = false;
  if (op == BinaryOp::Add)
    overflow = __builtin_add_overflow(a, b, &r);
  else if (op == BinaryOp::Sub)
    overflow = __builtin_sub_overflow(a, b, &r);
  else if (op == BinaryOp::Mul)
    overflow = __builtin_mul_overflow(a, b, &r);
  if (overflow)
    throw RuntimeFailure("integer overflow in " + std::to_string(a) + " " + symbol(op) + " " +
                         std::to_string(b) + " (ints are 64-bit)");
  return r;
}

long long floorDiv(long long a, long long b) {
  if (b == 0) throw RuntimeFailure("integer division or modulo by zero");
  // The one quotient past 64 bits; the CPU traps on it (SIGFPE ended the process).
  if (a == LLONG_MIN && b == -1)
    throw RuntimeFailure("integer overflow in " + std::to_string(a) + " // -1 (ints are 64-bit)");
  long long q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

// Python's float divmod: the remainder is fmod's, moved to the divisor's sign, and the quotient is
// computed from it, so that `1 // 0.1` is 9.0 and `1 % 0.1` about 0.1 (floor(1 / 0.1) would say
// 10.0, as 1 / 0.1 rounds up to exactly 10.0) and `q * y + r` stays close to x.
std::pair<double, double> floatDivmod(double x, double y, BinaryOp op) {
  if (y == 0)
    throw RuntimeFailure(op == BinaryOp::Mod ? "float modulo by zero"
                                             : "float floor division by zero");
  double mod = std::fmod(x, y);
  double div = (x - mod) / y;
  if (mod != 0) {
    if ((y < 0) != (mod < 0)) {
      mod += y;
      div -= 1.0;
    }
  } else {
    mod = std::copysign(0.0, y);
  }
  double floored = std::copysign(0.0, x / y);
  if (div != 0) {
    floored = std::floor(div);
    if (div - floored > 0.5) floored += 1.0;
  }
  return {floored, mod};
}

}  // namespace

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
      for (size_t i = 0; i < e.items.size(); ++i) {
        Value key = eval(*e.items[i]);  // before its value, as Python does
        setItem(d, key, eval(*e.values[i]));
      }
      return d;
    }
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

Value Interpreter::evalCall(const Expr& e) {
  // `x.save()` is handled here so that saving works on every kind of value.
  if (e.a->kind == ExprKind::Attribute && e.a->text == "save" && e.items.empty()) {
    return save(*e.a->a);
  }
  Value fn = eval(*e.a);
  CallArgs args;
  args.at = e.at;
  // Arguments may stay deferred: call() computes them unless the callee keeps them as they are.
  for (const auto& a : e.items) args.positional.push_back(evalLazy(*a));
  for (size_t i = 0; i < e.names.size(); ++i)
    args.keywords.emplace_back(e.names[i], evalLazy(*e.values[i]));
  return call(fn, args);
}

namespace {

// `a is b` as CPython answers it: values that are one object there are one here too, though we
// may have made two: None, the bools, a dtype (x.dtype is torch.float16) and the small ints
// CPython keeps one object of each of (-5 to 256).
bool sameObject(const Value& a, const Value& b) {
  if (a == b) return true;
  if (a->type != b->type) return false;
  switch (a->type) {
    case Type::None:
      return true;
    case Type::Bool:
      return a->boolValue == b->boolValue;
    case Type::Int:
      return a->intValue == b->intValue && a->intValue >= -5 && a->intValue <= 256;
    case Type::Namespace: {  // torch.float is torch.float32
      const auto x = builtin_args::asDtype(a);
      return x && x == builtin_args::asDtype(b);
    }
    default:
      return false;
  }
}

}  // namespace

namespace {

// The int a value equals, if any, for `in range(...)`: ints and bools as they are, an integral
// float (or a one-element float tensor) within the ints' span; another tensor as asInt reads it.
std::optional<long long> rangeMember(const Value& v) {
  const bool real = v->type == Type::Float || (v->type == Type::Tensor && v->tensor.numel() == 1 &&
                                               v->tensor.is_floating_point());
  if (real) {
    const double f = asNumber(v, "value");
    if (!std::isfinite(f) || f != std::floor(f) || f < -9.2e18 || f > 9.2e18) return std::nullopt;
    return static_cast<long long>(f);
  }
  if (v->type == Type::Int || v->type == Type::Bool || v->type == Type::Tensor)
    return asInt(v, "value");
  return std::nullopt;
}

}  // namespace

Value Interpreter::compare(CompareOp op, const Value& a, const Value& b) {
  if (op == CompareOp::Is) return boolean(sameObject(a, b));
  if (op == CompareOp::IsNot) return boolean(!sameObject(a, b));
  if (op == CompareOp::In || op == CompareOp::NotIn) {
    bool found = false;
    if (b->type == Type::Str) {
      if (a->type != Type::Str) fail("'in <string>' requires a string on the left");
      found = b->str.find(a->str) != std::string::npos;
    } else if (b->type == Type::Dict) {
      for (const auto& kv : b->dict) found |= equal(kv.first, a);
    } else if (isDictView(b->type)) {
      force(a, true);
      force(b, true);
      found = viewContains(*b, a);
    } else if (b->type == Type::Tuple || b->type == Type::List || b->type == Type::Size) {
      for (size_t i = 0; i < b->items.size() && !found; ++i) found = searchEquals(b->items[i], a);
    } else if (b->type == Type::Tensor) {  // torch's Tensor.__contains__: any element equal
      if (a->type != Type::Tensor && !isNumber(a))
        fail(std::string(
                 "Tensor.__contains__ only supports Tensor or scalar, but you passed in a ") +
             typeName(a->type));
      found = compare(CompareOp::Eq, b, a)->tensor.any().item<bool>();
    } else if (b->type == Type::Range) {
      // Python compares a value that is not an int with each item: a float is found where it
      // equals one (`3.0 in range(5)`), anything else never is.
      const std::optional<long long> x = rangeMember(a);
      found = x && (b->rangeStep > 0 ? (*x >= b->rangeStart && *x < b->rangeStop &&
                                        (*x - b->rangeStart) % b->rangeStep == 0)
                                     : (*x <= b->rangeStart && *x > b->rangeStop &&
                                        (b->rangeStart - *x) % -b->rangeStep == 0));
    } else {
      fail(std::string("argument of type '") + typeName(b->type) + "' is not iterable");
    }
    return boolean(op == CompareOp::In ? found : !found);
  }
  if (a->type == Type::Tensor || b->type == Type::Tensor) {
    const Value& other = a->type == Type::Tensor ? b : a;
    const bool comparable = other->type == Type::Tensor || isNumber(other);
    // Python's fallback where torch has no answer: `x == None` and `x == [1, 2]` are False,
    // `x != 'a'` True; an ordering is a TypeError.
    if (!comparable && (op == CompareOp::Eq || op == CompareOp::Ne))
      return boolean(op == CompareOp::Ne);
    if (!comparable)
      fail(std::string("'") + symbol(op) + "' not supported between instances of '" +
           typeName(a->type) + "' and '" + typeName(b->type) + "'");
    const at::Tensor& like = a->type == Type::Tensor ? a->tensor : b->tensor;
    at::Tensor x = a->type == Type::Tensor ? a->tensor : operandTensor(a, like);
    at::Tensor y = b->type == Type::Tensor ? b->tensor : operandTensor(b, like);
    requestMemory(broadcastBytes(x, y, at::kBool));
    if (op == CompareOp::Eq) return tensor(x == y);
    if (op == CompareOp::Ne) return tensor(x != y);
    if (op == CompareOp::Lt) return tensor(x < y);
    if (op == CompareOp::Le) return tensor(x <= y);
    if (op == CompareOp::Gt) return tensor(x > y);
    return tensor(x >= y);
  }
  if (op == CompareOp::Eq || op == CompareOp::Ne) {
    force(a, true);  // a list's items may be computed later (deferred module calls)
    force(b, true);
    return boolean(pythonEquals(a, b) == (op == CompareOp::Eq));
  }
  int c = 0;
  if (isNumber(a) && isNumber(b)) {
    const std::optional<int> ordered = compareNumbers(a, b);
    if (!ordered) return boolean(false);  // a NaN: every ordering is false
    c = *ordered;
  } else if (a->type == Type::Str && b->type == Type::Str) {
    c = a->str.compare(b->str);
  } else if ((a->type == Type::Tuple || a->type == Type::List) && a->type == b->type) {
    // As Python orders them: by the first items that differ (an item is its own equal), else by
    // length.
    NestingGuard nest(
        "in comparison: two values that contain themselves, or that nest lists or tuples too "
        "deeply (1000 levels at most), cannot be ordered");
    size_t i = 0;
    while (i < a->items.size() && i < b->items.size() && searchEquals(a->items[i], b->items[i]))
      ++i;
    if (i < a->items.size() && i < b->items.size()) return compare(op, a->items[i], b->items[i]);
    c = a->items.size() < b->items.size() ? -1 : a->items.size() > b->items.size() ? 1 : 0;
  } else if (isDictView(a->type) && isDictView(b->type)) {
    fail(std::string("'") + symbol(op) +
         "' between dict views (a subset test) is not supported in trace scripts");
  } else {
    fail(std::string("'") + symbol(op) + "' not supported between " + typeName(a->type) + " and " +
         typeName(b->type));
  }
  if (op == CompareOp::Lt) return boolean(c < 0);
  if (op == CompareOp::Le) return boolean(c <= 0);
  if (op == CompareOp::Gt) return boolean(c > 0);
  return boolean(c >= 0);
}

bool Interpreter::searchEquals(const Value& item, const Value& x) {
  if (item == x) return true;
  force(item, true);  // a list's items may be computed later (deferred module calls)
  force(x, true);
  return pythonEquals(item, x);
}

Value Interpreter::binary(BinaryOp op, const Value& a, const Value& b) {
  return charged(arithmetic(op, a, b));
}

namespace {

bool isSequence(const Value& v) {
  return v->type == Type::Str || v->type == Type::List || v->type == Type::Tuple ||
         v->type == Type::Size;
}

// Python's TypeError for operands an operator does not take: a sequence joins only its own kind
// and repeats only by an int; anything else names both types.
std::string operandsRefused(BinaryOp op, const Value& a, const Value& b) {
  if (op == BinaryOp::Add && isSequence(a)) {
    const std::string kind = a->type == Type::Str    ? "str"
                             : a->type == Type::List ? "list"
                                                     : "tuple";
    return "can only concatenate " + kind + " (not \"" + typeName(b->type) + "\") to " + kind;
  }
  if (op == BinaryOp::Mul && (isSequence(a) || isSequence(b)) && b->type != Type::Tensor &&
      a->type != Type::Tensor)
    return std::string("can't multiply sequence by non-int of type '") +
           typeName((isSequence(a) ? b : a)->type) + "'";
  return std::string("unsupported operand type(s) for ") + symbol(op) + ": '" + typeName(a->type) +
         "' and '" + typeName(b->type) + "'";
}

}  // namespace

Value Interpreter::arithmetic(BinaryOp op, const Value& a, const Value& b) {
  if (op == BinaryOp::Mul && (isSequence(a) || isSequence(b))) {
    // A sequence repeats by an integer tensor of one element, as by its int (its __index__).
    const Value& count = isSequence(a) ? b : a;
    if (count->type == Type::Tensor) {
      if (count->tensor.numel() != 1 ||
          !at::isIntegralType(count->tensor.scalar_type(), /*includeBool=*/true))
        fail("only integer tensors of a single element can be converted to an index");
      const Value n = integer(count->tensor.item<int64_t>());
      return isSequence(a) ? arithmetic(op, a, n) : arithmetic(op, n, b);
    }
  }
  if (a->type == Type::Tensor || b->type == Type::Tensor) {
    // torch takes a tensor or a number beside a tensor: `x + [1, 2]` is a TypeError there.
    const Value& other = a->type == Type::Tensor ? b : a;
    if (other->type != Type::Tensor && !isNumber(other)) fail(operandsRefused(op, a, b));
    const at::Tensor& like = a->type == Type::Tensor ? a->tensor : b->tensor;
    at::Tensor x = a->type == Type::Tensor ? a->tensor : operandTensor(a, like);
    at::Tensor y = b->type == Type::Tensor ? b->tensor : operandTensor(b, like);
    requestMemory(tensorResultBytes(op, x, y));
    if (op == BinaryOp::Add) return tensor(x + y);
    if (op == BinaryOp::Sub) return tensor(x - y);
    if (op == BinaryOp::Mul) return tensor(x * y);
    if (op == BinaryOp::Div) return tensor(at::div(x, y));
    if (op == BinaryOp::FloorDiv) return tensor(at::floor_divide(x, y));
    if (op == BinaryOp::Mod) return tensor(at::remainder(x, y));
    if (op == BinaryOp::Pow) return tensor(at::pow(x, y));
    if (op == BinaryOp::MatMul) return tensor(at::matmul(x, y));
    if (op == BinaryOp::BitAnd) return tensor(x & y);
    if (op == BinaryOp::BitOr) return tensor(x | y);
    if (op == BinaryOp::BitXor) return tensor(x ^ y);
    fail(std::string("operator ") + symbol(op) + " is not supported on tensors");
  }
  if (isNumber(a) && isNumber(b)) {
    const bool ints = a->type != Type::Float && b->type != Type::Float;
    if (ints) {
      const long long x = asInt(a, "operand"), y = asInt(b, "operand");
      if (op == BinaryOp::Add || op == BinaryOp::Sub || op == BinaryOp::Mul)
        return integer(checkedInt(x, y, op));
      if (op == BinaryOp::FloorDiv) return integer(floorDiv(x, y));
      if (op == BinaryOp::Mod) {
        if (y == 0) fail("integer division or modulo by zero");
        if (y == -1) return integer(0);  // also for the smallest int, whose // -1 overflows
        return integer(x - floorDiv(x, y) * y);
      }
      if (op == BinaryOp::Div) {
        if (y == 0) fail("division by zero");
        return floating(double(x) / double(y));
      }
      if (op == BinaryOp::Pow) {
        if (y < 0) return floating(std::pow(double(x), double(y)));
        long long r = 1, base = x;  // by squaring: 1 ** 10**18 takes 60 steps, not 10**18
        for (long long e = y; e > 0; e >>= 1) {
          if (e & 1) r = checkedInt(r, base, BinaryOp::Mul);
          if (e > 1) base = checkedInt(base, base, BinaryOp::Mul);
        }
        return integer(r);
      }
      // Between two bools, & | ^ give a bool (True & False is False), as in Python.
      const bool bools = a->type == Type::Bool && b->type == Type::Bool;
      if (op == BinaryOp::BitAnd) return bools ? boolean(x & y) : integer(x & y);
      if (op == BinaryOp::BitOr) return bools ? boolean(x | y) : integer(x | y);
      if (op == BinaryOp::BitXor) return bools ? boolean(x ^ y) : integer(x ^ y);
      if (op == BinaryOp::LShift || op == BinaryOp::RShift) {
        if (y < 0) fail("negative shift count");
        if (op == BinaryOp::RShift) return integer(y >= 63 ? (x < 0 ? -1 : 0) : x >> y);
        if (x != 0 && (y >= 63 || (x > 0 ? x > (LLONG_MAX >> y) : x < (LLONG_MIN >> y))))
          fail("integer overflow in " + std::to_string(x) + " << " + std::to_string(y) +
               " (ints are 64-bit)");
        return integer(x == 0 ? 0 : (long long)((unsigned long long)x << y));
      }
    }
    const double x = asNumber(a, "operand"), y = asNumber(b, "operand");
    if (op == BinaryOp::Add) return floating(x + y);
    if (op == BinaryOp::Sub) return floating(x - y);
    if (op == BinaryOp::Mul) return floating(x * y);
    if (op == BinaryOp::Div) {
      if (y == 0) fail("float division by zero");
      return floating(x / y);
    }
    if (op == BinaryOp::FloorDiv) return floating(floatDivmod(x, y, op).first);
    if (op == BinaryOp::Mod) return floating(floatDivmod(x, y, op).second);
    if (op == BinaryOp::Pow) return floating(std::pow(x, y));
  }
  if (op == BinaryOp::Add && a->type == Type::Str && b->type == Type::Str) {
    requestMemory(int64_t(a->str.size() + b->str.size()));
    return string(a->str + b->str);
  }
  // torch.Size is a tuple of ints: it joins tuples and repeats as one, and stays a Size where it
  // leads (`x.shape + (1,)`, `x.shape * 2`; `(1,) + x.shape` is a tuple), as in torch.
  const auto tupleLike = [](const Value& v) {
    return v->type == Type::Tuple || v->type == Type::Size;
  };
  if (op == BinaryOp::Add &&
      ((a->type == Type::List && b->type == Type::List) || (tupleLike(a) && tupleLike(b)))) {
    requestMemory(int64_t((a->items.size() + b->items.size()) * sizeof(Value)));
    std::vector<Value> items = a->items;
    items.insert(items.end(), b->items.begin(), b->items.end());
    return sequenceLike(a->type, std::move(items));
  }
  const auto count = [](const Value& v) { return v->type == Type::Int || v->type == Type::Bool; };
  if (op == BinaryOp::Mul && count(a) && isSequence(b))
    return arithmetic(op, b, a);  // `3 * "ab"` repeats as `"ab" * 3` does
  if (op == BinaryOp::Mul && isSequence(a) && count(b)) {
    const long long times = std::max(0LL, b->type == Type::Bool ? b->boolValue : b->intValue);
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
    return sequenceLike(a->type, std::move(items));
  }
  if (op == BinaryOp::Mod && a->type == Type::Str)
    fail("'%' string formatting is not supported; use an f-string");
  const bool setOp = op == BinaryOp::BitAnd || op == BinaryOp::BitOr || op == BinaryOp::BitXor ||
                     op == BinaryOp::Sub;
  if (setOp && (isDictView(a->type) || isDictView(b->type)))
    fail(std::string("set operations on dict views (") + symbol(op) +
         ") are not supported in trace scripts (there are no sets); compare keys with `in` or "
         "build the list you need");
  fail(operandsRefused(op, a, b));
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
