// Interpreter, operators: comparisons (==, <, in, is ...) and arithmetic (+, *, @, //, ** ... of
// numbers, sequences, strings and tensors), each refusing what Python refuses with its TypeError.
#include <cmath>
#include <optional>

#include "builtin_args.h"
#include "dict_view.h"
#include "interpreter.h"
#include "percent_format.h"
#include "python_numbers.h"
#include "result_sizes.h"

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

}  // namespace

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
      found = findKey(*b, a) != b->dict.end();
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
  // str's % comes first, whatever the right side is: "%.3f" % tensor formats its element
  if (op == BinaryOp::Mod && a->type == Type::Str) return string(percentFormat(a->str, b));
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
  const bool setOp = op == BinaryOp::BitAnd || op == BinaryOp::BitOr || op == BinaryOp::BitXor ||
                     op == BinaryOp::Sub;
  if (setOp && (isDictView(a->type) || isDictView(b->type)))
    fail(std::string("set operations on dict views (") + symbol(op) +
         ") are not supported in trace scripts (there are no sets); compare keys with `in` or "
         "build the list you need");
  fail(operandsRefused(op, a, b));
}

}  // namespace shardscope::trace
