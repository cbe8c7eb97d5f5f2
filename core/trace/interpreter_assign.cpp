// Interpreter: assignment, augmented assignment and del, to names, items, slices, module ports
// and unpacked targets.
#include <algorithm>

#include "interpreter.h"

namespace shardscope::trace {

void Interpreter::execAssign(const Stmt& s) {
  if (s.targets.size() == 1 && s.targets[0]->kind == ExprKind::Subscript) {
    // The target first: `port[idx] = value` waits for the port before evaluating the value,
    // so a value made by an earlier invoke at the same port (patching) is already there.
    Value obj = eval(*s.targets[0]->a);
    Value index = eval(*s.targets[0]->b);
    setItem(obj, index, eval(*s.value));
    return;
  }
  bool names = true;  // `x = call(...)` keeps a deferred value deferred
  for (const auto& t : s.targets) names &= t->kind == ExprKind::Name;
  Value v = names ? evalLazy(*s.value) : eval(*s.value);
  for (const auto& t : s.targets) assign(*t, v);
}

void Interpreter::execAugAssign(const Stmt& s) {
  const Expr& t = *s.targets[0];
  // A subscript's object and index are evaluated once, before the value, as in Python
  // (`x[f()] += 1` calls f once).
  Value obj, index, current;
  if (t.kind == ExprKind::Subscript) {
    obj = eval(*t.a);
    index = eval(*t.b);
    current = getItem(obj, index);
    force(current);
  } else {
    current = eval(t);
  }
  const auto store = [&](const Value& v) {
    if (obj) return setItem(obj, index, v);
    assign(t, v);
  };
  Value rhs = eval(*s.value);
  if (current->type == Type::Tensor) {
    // torch takes a tensor or a number, as for `x + [1, 2]` (binary()).
    if (rhs->type != Type::Tensor && !isNumber(rhs))
      fail(std::string("unsupported operand type(s) for ") + symbol(s.augOp) + "=: 'Tensor' and '" +
           typeName(rhs->type) + "'");
    noteTensorWrite();
    // In place, as torch does (a name that shares the tensor sees it): edits through a port view
    // are writes. `@=` rebinds, as torch has no in-place matmul.
    const at::Tensor r = operandTensor(rhs, current->tensor);
    at::Tensor& x = current->tensor;
    switch (s.augOp) {
      case BinaryOp::Add:
        x.add_(r);
        break;
      case BinaryOp::Sub:
        x.sub_(r);
        break;
      case BinaryOp::Mul:
        x.mul_(r);
        break;
      case BinaryOp::Div:
        x.div_(r);
        break;
      case BinaryOp::FloorDiv:
        x.floor_divide_(r);
        break;
      case BinaryOp::Mod:
        x.remainder_(r);
        break;
      case BinaryOp::Pow:
        x.pow_(r);
        break;
      case BinaryOp::BitAnd:
        x.bitwise_and_(r);
        break;
      case BinaryOp::BitOr:
        x.bitwise_or_(r);
        break;
      case BinaryOp::BitXor:
        x.bitwise_xor_(r);
        break;
      case BinaryOp::LShift:
        x.__ilshift__(r);
        break;
      case BinaryOp::RShift:
        x.__irshift__(r);
        break;
      default:
        return store(binary(s.augOp, current, rhs));
    }
    // An index that copies (a list of indices, a mask) gave a copy: it is written back, as
    // Python's __setitem__ after __iadd__ writes it (`t[[0, 2]] += 1` changed nothing). A view
    // was written through.
    if (obj && obj->type == Type::Tensor && !current->tensor.is_alias_of(obj->tensor))
      store(current);
  } else if (current->type == Type::List && s.augOp == BinaryOp::Add) {
    // A copy: `x += x` reads what it grows. Any iterable extends, as in Python (`x += "ab"`).
    const std::vector<Value> added = elementsOf(rhs, *this);
    requestMemory(int64_t((current->items.size() + added.size()) * sizeof(Value)));
    for (const Value& v : added) noteStored(current, v);
    current->items.insert(current->items.end(), added.begin(), added.end());
    // Written back, as Python's __setitem__ after __iadd__: a slice was a copy (`l[0:2] += [9]`
    // changed nothing), and a tuple refuses (`t[1] += [3]` extends, then fails, as in Python).
    if (obj) store(current);
  } else {
    store(binary(s.augOp, current, rhs));
  }
}

void Interpreter::execDelete(const Expr& target) {
  switch (target.kind) {
    case ExprKind::Name: {
      at_ = target.at;
      if (env_->vars().erase(target.text)) {
        deleted_.insert(target.text);
        return;
      }
      if (env_ != globals_ && env_->find(target.text))  // Python: `del x` makes x local
        fail("cannot access local variable '" + target.text +
             "' where it is not associated with a value");
      fail("name '" + target.text + "' is not defined");
    }
    case ExprKind::Tuple:
    case ExprKind::List:
      for (const auto& t : target.items) execDelete(*t);
      return;
    case ExprKind::Subscript: {
      Value obj = eval(*target.a);
      delItem(obj, eval(*target.b));
      return;
    }
    case ExprKind::Attribute:
      fail("cannot delete attribute '" + target.text + "' of " + typeName(eval(*target.a)->type) +
           ": attributes cannot be deleted in trace scripts");
    default:
      failInternal("the parser let `del` take an expression it cannot delete");
  }
}

// Targets `targets` (one may be starred: `first, *rest`) take `items` in order.
void Interpreter::assignItems(const std::vector<ExprPtr>& targets,
                              const std::vector<Value>& items) {
  const auto starred = std::find_if(targets.begin(), targets.end(),
                                    [](const ExprPtr& t) { return t->kind == ExprKind::Starred; });
  const size_t fixed = targets.size() - (starred == targets.end() ? 0 : 1);
  if (items.size() < fixed) {
    fail("not enough values to unpack (expected " +
         std::string(starred == targets.end() ? "" : "at least ") + std::to_string(fixed) +
         ", got " + std::to_string(items.size()) + ")");
  }
  if (starred == targets.end() && items.size() > fixed)
    fail("too many values to unpack (expected " + std::to_string(fixed) + ")");
  const size_t before = size_t(starred - targets.begin()), rest = items.size() - fixed;
  for (size_t i = 0; i < before; ++i) assign(*targets[i], items[i]);
  if (starred == targets.end()) return;
  const auto from = items.begin() + std::ptrdiff_t(before);
  chargeMemory(int64_t(rest * sizeof(Value)));  // the list holds the items, not copies
  assign(*(*starred)->a, list({from, from + std::ptrdiff_t(rest)}));
  for (size_t i = before + 1; i < targets.size(); ++i) assign(*targets[i], items[i - 1 + rest]);
}

void Interpreter::assign(const Expr& target, const Value& v) {
  switch (target.kind) {
    case ExprKind::Name:
      env_->set(target.text, v);
      if (env_ == globals_) assigned_.insert(target.text);
      if (!deleted_.empty()) deleted_.erase(target.text);
      return;
    case ExprKind::Tuple:
    case ExprKind::List: {
      if (v->type == Type::Tensor && v->tensor.dim() == 0) fail("cannot unpack a 0-d tensor");
      if (!isIterable(v))
        fail(std::string("cannot unpack non-iterable ") + typeName(v->type) + " object");
      // Any iterable unpacks, as in Python: `a, b = "xy"`, `k1, k2 = d` (a dict's keys).
      return assignItems(target.items, elementsOf(v, *this));
    }
    case ExprKind::Subscript: {
      Value obj = eval(*target.a);
      setItem(obj, eval(*target.b), v);
      return;
    }
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

}  // namespace shardscope::trace
