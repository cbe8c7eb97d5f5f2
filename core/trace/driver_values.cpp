#include "driver_values.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <unordered_set>

#include "../host_tensor_conversion.h"
#include "dict_view.h"
#include "interpreter.h"
#include "names_mentioned.h"
#include "trace_device.h"

namespace shardscope::trace {
namespace {

// A copy of a value whose tuples, lists, dicts (keys and values), dict views and result objects
// (a RequestOutput's fields) are new objects and whose tensors are what `copyTensor` makes of them
// (nullptr: the tensor as it is). A value reached twice (a list under two names, a dict and a view
// of it, a list that holds itself) is copied once, so the copies alias as the originals do. Both
// crossings use it: the driver's values into each rank's block, and the saved values back to the
// driver.
class ValueCopy {
 public:
  using CopyTensor = std::function<Value(const Object&)>;
  // keepSaved: the copies carry the originals' `saved` mark (a saved value leaving its block).
  // driverScope, blockFunctions and blockScopes: see rebound.
  ValueCopy(CopyTensor copyTensor, bool keepSaved, const char* during,
            const Environment* driverScope = nullptr,
            std::vector<InvokeSpec::BlockFunction>* blockFunctions = nullptr,
            std::vector<std::shared_ptr<Environment>>* blockScopes = nullptr)
      : copyTensor_(std::move(copyTensor)),
        keepSaved_(keepSaved),
        during_(during),
        driverScope_(driverScope),
        blockFunctions_(blockFunctions),
        blockScopes_(blockScopes) {}

  Value operator()(const Value& v) {
    if (const auto it = copies_.find(v.get()); it != copies_.end()) return it->second;
    Value c;
    switch (v->type) {
      case Type::Tensor:
        c = copyTensor_(*v);
        if (!c) return v;
        break;
      case Type::Tuple:
      case Type::List:
        c = v->type == Type::List ? list({}) : tuple({});
        c->str = v->str;  // a named tuple's type and fields
        c->fields = v->fields;
        break;
      case Type::Dict:
      case Type::ResultObject:
        c = std::make_shared<Object>(*v);  // its keys and values, or fields, are replaced below
        break;
      case Type::DictKeys:
      case Type::DictValues:
      case Type::DictItems:
        c = dictView(v->type, nullptr);
        break;
      case Type::Builtin:
        return boundTo(v);
      case Type::Function:
        return rebound(v);
      default:
        return v;
    }
    if (keepSaved_) c->saved = v->saved;
    copies_[v.get()] = c;  // before what it holds: one may be this value itself
    if (v->type == Type::Tensor) return c;
    NestingGuard nest(during_);
    if (v->type == Type::Dict) {
      for (auto& [k, i] : c->dict) {
        k = (*this)(k);
        i = (*this)(i);
      }
    } else if (v->type == Type::ResultObject) {
      for (auto& [name, field] : c->attributes) field = (*this)(field);
    } else if (v->type == Type::Tuple || v->type == Type::List) {
      c->items.reserve(v->items.size());
      for (const auto& i : v->items) c->items.push_back((*this)(i));
    } else {
      c->items[0] = (*this)(viewedDict(*v));
    }
    return c;
  }

 private:
  // A bound method (list.append) acts on the copy of its list, as the same method looked up on
  // the copy would: a driver's `m = log.append` called in a block appends to the rank's `log`.
  Value boundTo(const Value& method) {
    if (method->items.empty()) return method;  // a plain builtin: shared as it is
    const Value receiver = (*this)(method->items.front());
    // The receiver may hold this method: copying it may have copied the method already.
    if (const auto it = copies_.find(method.get()); it != copies_.end()) return it->second;
    Value c = receiver == method->items.front() ? nullptr : boundMethodOf(receiver, method->str);
    if (!c) c = method;
    copies_[method.get()] = c;
    return c;
  }

  // A function the driver made (in its global scope, driverScope_, or in a call of one of its
  // functions) becomes a copy with its own defaults copied (blockFunctions_): called in a block it
  // reads and writes the rank's copies of the driver names, as the block does. Its closure, the
  // block's scope or a copy of its call's scope (scopeCopy), is set by the Interleaver, last, as
  // it closes the cycles. Such a function once ran with the driver's own names: `def reg(x):
  // log.append(x)` appended to the driver's list from every rank's thread at once at tp > 1.
  Value rebound(const Value& f) {
    if (!blockFunctions_ || !f->function || !madeByDriver(f->function->closure.get())) return f;
    auto c = std::make_shared<Object>(*f);
    c->function = std::make_shared<FunctionDef>(*f->function);
    c->function->closure = nullptr;
    copies_[f.get()] = c;  // before its defaults and scope: either may hold this function
    NestingGuard nest(during_);
    const std::shared_ptr<Environment>& closure = f->function->closure;
    std::shared_ptr<Environment> scope;
    if (closure.get() != driverScope_) {
      std::set<std::string> names;
      addFreeNames(*f->function, names);
      scope = scopeCopy(closure.get(), std::move(names));
    }
    blockFunctions_->push_back({c, std::move(scope)});
    for (Value& d : c->function->defaults) {
      if (d) d = (*this)(d);
    }
    return c;
  }

  bool madeByDriver(const Environment* scope) const {
    for (; scope; scope = scope->parent().get()) {
      if (scope == driverScope_) return true;
    }
    return false;
  }

  // The rank's copy of `closure`, a driver function's call scope, and of the call scopes above it
  // up to the driver's globals: each copied once however many functions close over it
  // (blockScopes_), and holding copies of only the values a function closing over it may read
  // (`names`, its free names; a name found in a scope is not looked for above it), added to as
  // more functions reach it. The outermost copy has no parent until the Interleaver gives it the
  // block's scope.
  std::shared_ptr<Environment> scopeCopy(const Environment* closure, std::set<std::string> names) {
    // First the chain of copies, linked: copying a value below may reach these scopes again.
    std::vector<std::pair<const Environment*, Environment*>> chain;
    for (const Environment* s = closure; s != driverScope_; s = s->parent().get()) {
      auto [it, made] = scopes_.try_emplace(s);
      if (made) {
        it->second = std::make_shared<Environment>();
        blockScopes_->push_back(it->second);
      }
      if (!chain.empty() && !chain.back().second->parent())
        chain.back().second->setParent(it->second);
      chain.emplace_back(s, it->second.get());
    }
    for (const auto& [scope, copy] : chain) {
      for (auto n = names.begin(); n != names.end();) {
        const auto v = scope->vars().find(*n);
        if (v == scope->vars().end()) {
          ++n;
          continue;
        }
        if (!copy->vars().count(*n)) copy->set(*n, (*this)(v->second));
        n = names.erase(n);
      }
    }
    return scopes_.at(closure);
  }

  CopyTensor copyTensor_;
  bool keepSaved_;
  const char* during_;
  const Environment* driverScope_;
  std::vector<InvokeSpec::BlockFunction>* blockFunctions_;
  std::vector<std::shared_ptr<Environment>>* blockScopes_;
  std::map<const Object*, Value> copies_;
  std::map<const Environment*, std::shared_ptr<Environment>> scopes_;  // scopeCopy's
};

// Saved values reach the driver on the host. The device tensors of every saved value (a list read
// at every step holds one per step) move in one transfer per device and dtype, not one
// synchronising copy each; each tensor gets its own host storage. Tuples, lists, dicts (keys and
// values) and dict views are followed (each once: one may hold itself) from a list of what is
// left, not by recursing, so a value nested 100000 deep is walked safely.
void deviceLeaves(const Value& v, std::vector<const Object*>& out) {
  std::unordered_set<const Object*> seen;
  std::vector<const Object*> left{v.get()};
  while (!left.empty()) {
    const Object* o = left.back();
    left.pop_back();
    if (!seen.insert(o).second) continue;
    if (o->type == Type::Tensor && o->tensor.defined() && !o->tensor.is_cpu()) out.push_back(o);
    const bool items = o->type == Type::Tuple || o->type == Type::List || isDictView(o->type);
    if (items) {
      for (const auto& i : o->items) left.push_back(i.get());
    } else if (o->type == Type::Dict) {
      for (const auto& [k, i] : o->dict) {
        left.push_back(k.get());
        left.push_back(i.get());
      }
    }
  }
}

// Copies `objects` (one device and dtype) to the host through one concatenation.
void moveBatchToHost(const std::vector<const Object*>& objects,
                     std::map<const Object*, at::Tensor>& host) {
  std::vector<at::Tensor> flat;
  for (const Object* o : objects) flat.push_back(o->tensor.reshape(-1));
  const at::Tensor all = at::cat(flat).to(at::kCPU);
  int64_t offset = 0;
  for (const Object* o : objects) {
    const int64_t n = o->tensor.numel();
    host[o] = all.narrow(0, offset, n).view(o->tensor.sizes()).clone();
    offset += n;
  }
}

std::map<const Object*, at::Tensor> moveToHost(const std::vector<const Object*>& leaves) {
  // A concatenation holds at most this much on the device; a larger tensor moves on its own.
  constexpr int64_t kMaxBatchBytes = int64_t(64) << 20;
  std::map<const Object*, at::Tensor> host;
  struct Batch {
    std::vector<const Object*> objects;
    int64_t bytes = 0;
  };
  std::map<std::pair<std::string, at::ScalarType>, Batch> batches;
  for (const Object* o : leaves) {
    const at::Tensor& t = o->tensor;
    const int64_t bytes = t.numel() * int64_t(t.element_size());
    if (bytes > kMaxBatchBytes) {
      host[o] = t.to(at::kCPU);
      continue;
    }
    Batch& b = batches[{t.device().str(), t.scalar_type()}];
    if (b.bytes + bytes > kMaxBatchBytes) {
      moveBatchToHost(b.objects, host);
      b = Batch();
    }
    b.objects.push_back(o);
    b.bytes += bytes;
  }
  for (const auto& [key, b] : batches) {
    if (!b.objects.empty()) moveBatchToHost(b.objects, host);
  }
  return host;
}

}  // namespace

std::map<std::string, Value> savedOnHost(const std::map<std::string, Value>& saved) {
  std::vector<const Object*> leaves;
  for (const auto& [name, v] : saved) deviceLeaves(v, leaves);
  std::sort(leaves.begin(), leaves.end());
  leaves.erase(std::unique(leaves.begin(), leaves.end()), leaves.end());  // a value under two names
  const std::map<const Object*, at::Tensor> host = moveToHost(leaves);
  // Tuples, lists, dicts and dict views are copied on any device alike, so a saved list and a
  // saved dict that holds it alias in the driver as in the block.
  ValueCopy rebuild(
      [&host](const Object& o) -> Value {
        const auto it = host.find(&o);
        return it == host.end() ? nullptr : tensor(it->second);
      },
      true,
      "while copying a saved value out of the trace block: it nests lists, tuples, dicts or result "
      "objects too deeply (1000 levels at most)");
  std::map<std::string, Value> out;
  for (const auto& [name, v] : saved) {
    try {
      out[name] = rebuild(v);
    } catch (const RuntimeFailure& e) {
      throw RuntimeFailure("the saved value '" + name + "': " + e.what());
    }
  }
  return out;
}

// The invokes with one rank's copies of their captured values. The copies are held only by the
// result, so that the block that takes them frees them when it ends, cycles included.
std::vector<InvokeSpec> rankCopies(std::vector<InvokeSpec> invokes) {
  if (invokes.empty()) return invokes;
  std::vector<InvokeSpec::BlockFunction>& functions = invokes[0].blockFunctions;
  std::vector<std::shared_ptr<Environment>>& scopes = invokes[0].blockScopes;
  functions.clear();
  scopes.clear();
  ValueCopy capture(
      [](const Object& o) { return tensor(o.tensor.to(currentDevice()).clone()); }, false,
      "while copying a value into the trace block: it nests lists, tuples, dicts or functions' "
      "scopes too deeply (1000 levels at most)",
      invokes[0].driverScope, &functions, &scopes);
  for (auto& inv : invokes) {
    for (auto& [k, v] : inv.captured) {
      try {
        v = capture(v);
      } catch (const RuntimeFailure& e) {
        throw RuntimeFailure("'" + k + "': " + e.what());
      }
    }
  }
  return invokes;
}

// A saved value as plain data: tensors keep their dtype; tuples and lists of tensors become one
// entry per item; anything else is kept as its repr.
void appendSaved(const std::string& name, const Value& v, std::vector<SavedValue>& out) {
  NestingGuard nest(
      "while recording a saved value: it nests tuples too deeply (1000 levels at most)");
  if (v->type == Type::Tensor) {
    SavedValue s;
    s.name = name;
    s.tensor = toHost(v->tensor);
    out.push_back(std::move(s));
    return;
  }
  const bool sequence = v->type == Type::Tuple || v->type == Type::List;
  const bool allTensors = sequence && !v->items.empty() &&
                          std::all_of(v->items.begin(), v->items.end(), [](const Value& i) {
                            return i->type == Type::Tensor || i->type == Type::Tuple;
                          });
  if (allTensors) {
    for (size_t i = 0; i < v->items.size(); ++i)
      appendSaved(name + "[" + std::to_string(i) + "]", v->items[i], out);
    return;
  }
  SavedValue s;
  s.name = name;
  s.repr = repr(v);
  out.push_back(std::move(s));
}

}  // namespace shardscope::trace
