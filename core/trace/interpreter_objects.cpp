// Interpreter, objects: attributes of values (methods of list, tuple, dict and str; module,
// tracer and tensor attributes through the host and builtins) and subscripts (indexing, slicing,
// item and slice assignment, deletion), with Python's semantics.
#include "builtin_args.h"
#include "dict_view.h"
#include "interpreter.h"
#include "result_sizes.h"
#include "str_methods.h"
#include "trace_device.h"

#include <c10/util/Exception.h>
#include <algorithm>
#include <cctype>
#include <functional>
#include <memory>

namespace shardscope::trace {
namespace {

long long normalizeIndex(long long i, size_t n) {
  const long long k = i < 0 ? i + (long long)n : i;
  if (k < 0 || k >= (long long)n)
    throw RuntimeFailure("index " + std::to_string(i) + " out of range for length " +
                         std::to_string(n));
  return k;
}

// A slice over a sequence of length n, its bounds clamped as Python's slice.indices(n) clamps them:
// it selects start, start + step, ... before stop (`length` of them).
struct SliceBounds {
  long long start = 0, stop = 0, step = 1, length = 0;
};

SliceBounds sliceBounds(const Value& s, size_t n) {
  SliceBounds b;
  b.step = s->items[2]->type == Type::None ? 1 : asInt(s->items[2], "slice step");
  if (b.step == 0) throw RuntimeFailure("slice step cannot be zero");
  const long long len = (long long)n;
  const auto bound = [&](const Value& v, long long dflt) {
    if (v->type == Type::None) return dflt;
    long long i = asInt(v, "slice index");
    if (i < 0) i += len;
    return b.step > 0 ? std::clamp(i, 0LL, len) : std::clamp(i, -1LL, len - 1);
  };
  b.start = bound(s->items[0], b.step > 0 ? 0 : len - 1);
  b.stop = bound(s->items[1], b.step > 0 ? len : -1);
  if (b.step > 0 && b.start < b.stop) b.length = (b.stop - b.start - 1) / b.step + 1;
  if (b.step < 0 && b.stop < b.start) b.length = (b.start - b.stop - 1) / -b.step + 1;
  return b;
}

// Python slice semantics over a sequence of length n: the indices the slice selects.
std::vector<long long> sliceIndices(const Value& s, size_t n) {
  const SliceBounds b = sliceBounds(s, n);
  std::vector<long long> out;
  for (long long k = 0; k < b.length; ++k) out.push_back(b.start + k * b.step);
  return out;
}

// A method bound to a list, tuple or dict. The method holds its receiver in its items, where the
// release of a run's cycles counts it, and reaches it through a weak reference: a capture would
// hide the reference, and `a.append(a.append)` kept `a` (and every tensor in it) alive.
Value boundMethod(const Value& receiver, const std::string& name,
                  std::function<Value(const Value& self, CallArgs&)> fn) {
  Value method = builtin(
      name, [self = std::weak_ptr<Object>(receiver), name, fn = std::move(fn)](CallArgs& a) {
        const Value receiver = self.lock();
        if (!receiver)  // only after the run's end emptied the method, which nothing can call then
          throw RuntimeFailure(name + "(): the object it belongs to no longer exists");
        return fn(receiver, a);
      });
  method->items = {receiver};
  return method;
}

// list.index / list.count (and tuple's): Python's semantics, `index(x[, start[, end]])`.
Value sequenceSearch(const Value& receiver, const std::string& name) {
  return boundMethod(receiver, name, [name](const Value& seq, CallArgs& a) {
    const Value& x = a.required(0, "value");
    const auto& items = seq->items;
    if (name == "count") {
      return integer((long long)std::count_if(items.begin(), items.end(), [&](const Value& v) {
        return a.interpreter->searchEquals(v, x);
      }));
    }
    const long long n = (long long)items.size();
    const auto bound = [n](const Value* v, long long dflt) {
      if (!v) return dflt;
      long long i = asInt(*v, "index bound");
      if (i < 0) i += n;
      return std::clamp(i, 0LL, n);
    };
    const long long start = bound(a.get(1, "start"), 0), end = bound(a.get(2, "end"), n);
    for (long long i = start; i < end; ++i) {
      if (a.interpreter->searchEquals(items[size_t(i)], x)) return integer(i);
    }
    throw RuntimeFailure(repr(x) + " is not in " + typeName(seq->type));
  });
}

// insert, remove, sort, reverse, clear and copy, as Python's list has them; null for another name.
Value listEdit(const Value& obj, const std::string& name) {
  using builtin_args::checkArguments;
  using builtin_args::Takes;
  if (name == "insert") {
    return boundMethod(obj, "insert", [](const Value& self, CallArgs& a) {
      checkArguments(a, Takes{2, {"index", "object"}, 2}, "list.insert");
      a.interpreter->requestMemory(int64_t((self->items.size() + 1) * sizeof(Value)));
      const long long n = (long long)self->items.size();
      long long i = asInt(a.positional[0], "index");  // clamped as Python's, never out of range
      if (i < 0) i = std::max(0LL, i + n);
      self->items.insert(self->items.begin() + std::min(i, n), a.positional[1]);
      return none();
    });
  }
  if (name == "remove") {
    return boundMethod(obj, "remove", [](const Value& self, CallArgs& a) {
      checkArguments(a, Takes{1, {"value"}, 1}, "list.remove");
      auto& items = self->items;
      const auto it = std::find_if(items.begin(), items.end(), [&](const Value& v) {
        return a.interpreter->searchEquals(v, a.positional[0]);
      });
      if (it == items.end()) throw RuntimeFailure("list.remove(x): x not in list");
      items.erase(it);
      return none();
    });
  }
  if (name == "sort") {
    return boundMethod(obj, "sort", [](const Value& self, CallArgs& a) {
      checkArguments(a, Takes{0, {"key", "reverse"}}, "list.sort");
      self->items = sortedByKey(a, self->items);
      return none();
    });
  }
  if (name == "reverse" || name == "clear" || name == "copy") {
    return boundMethod(obj, name, [name](const Value& self, CallArgs& a) {
      checkArguments(a, Takes{}, "list." + name);
      if (name == "copy") return list(self->items);
      if (name == "reverse") std::reverse(self->items.begin(), self->items.end());
      if (name == "clear") self->items.clear();
      return none();
    });
  }
  return nullptr;
}

// The list methods scripts use; null for a name that is none.
Value listMethod(const Value& obj, const std::string& name) {
  if (name == "append") {
    Value append = boundMethod(obj, "append", [](const Value& self, CallArgs& a) {
      self->items.push_back(a.required(0));
      return none();
    });
    append->takesDeferred = true;  // a list may hold deferred tensors (the logit lens)
    return append;
  }
  if (name == "extend") {
    Value extend = boundMethod(obj, "extend", [](const Value& self, CallArgs& a) {
      // A copy, so `x.extend(x)` is safe; any iterable extends, as in Python (`x.extend("ab")`).
      const std::vector<Value> added = elementsOf(a.required(0), *a.interpreter);
      // Asked for before it grows, as `+=` does: `x.extend(x)` forty times took the machine's
      // memory past any budget (no new value is made, so nothing else charged it).
      a.interpreter->requestMemory(int64_t((self->items.size() + added.size()) * sizeof(Value)));
      self->items.insert(self->items.end(), added.begin(), added.end());
      return none();
    });
    extend->takesDeferred = true;
    return extend;
  }
  if (name == "index" || name == "count") return sequenceSearch(obj, name);
  if (name == "pop") {
    return boundMethod(obj, "pop", [](const Value& self, CallArgs& a) {
      if (self->items.empty()) throw RuntimeFailure("pop from empty list");
      const long long i = a.positional.empty() ? -1 : asInt(a.positional[0], "index");
      const long long k = normalizeIndex(i, self->items.size());
      Value v = self->items[k];
      self->items.erase(self->items.begin() + k);
      return v;
    });
  }
  return listEdit(obj, name);
}

// d[key] = v as item assignment does it: in place for a key it has, else at the end.
void putEntry(Object& d, const Value& key, const Value& v) {
  const auto it = findKey(d, key);
  if (it != d.dict.end()) {
    it->second = v;
    return;
  }
  d.dict.emplace_back(key, v);
  ++d.keyEdits;
}

// update, pop, setdefault, popitem, clear and copy, as Python's dict has them; null for another.
Value dictEdit(const Value& obj, const std::string& name) {
  using builtin_args::checkArguments;
  using builtin_args::Takes;
  if (name == "update") {
    return boundMethod(obj, "update", [](const Value& self, CallArgs& a) {
      if (a.positional.size() > 1)  // and any keywords: d.update(a=1)
        throw RuntimeFailure("dict.update() expected at most 1 argument, got " +
                             std::to_string(a.positional.size()));
      std::vector<std::pair<Value, Value>> added;
      if (!a.positional.empty()) {
        const Value& other = a.positional[0];
        if (other->type == Type::Dict) {
          added = other->dict;
        } else {
          size_t i = 0;  // an iterable of (key, value) pairs
          for (const Value& pair : elementsOf(other, *a.interpreter)) {
            const std::string element =
                "dictionary update sequence element #" + std::to_string(i++);
            if (!isIterable(pair))
              throw RuntimeFailure("cannot convert " + element + " to a sequence");
            const std::vector<Value> kv = elementsOf(pair, *a.interpreter);
            if (kv.size() != 2)
              throw RuntimeFailure(element + " has length " + std::to_string(kv.size()) +
                                   "; 2 is required");
            added.emplace_back(kv[0], kv[1]);
          }
        }
      }
      for (const auto& [k, v] : a.keywords) added.emplace_back(string(k), v);
      a.interpreter->requestMemory(int64_t((self->dict.size() + added.size()) * 2 * sizeof(Value)));
      for (const auto& [k, v] : added) {
        a.interpreter->noteStored(self, k);
        a.interpreter->noteStored(self, v);
        putEntry(*self, k, v);
      }
      return none();
    });
  }
  if (name == "pop") {
    return boundMethod(obj, "pop", [](const Value& self, CallArgs& a) {
      checkArguments(a, Takes{2, {"key", "default"}, 1}, "dict.pop");
      const auto it = findKey(*self, a.positional[0]);
      if (it == self->dict.end()) {
        if (a.positional.size() > 1) return a.positional[1];
        throw RuntimeFailure("KeyError: " + repr(a.positional[0]));
      }
      Value v = it->second;
      eraseEntry(*self, it);
      return v;
    });
  }
  if (name == "setdefault") {
    return boundMethod(obj, "setdefault", [](const Value& self, CallArgs& a) {
      checkArguments(a, Takes{2, {"key", "default"}, 1}, "dict.setdefault");
      const auto it = findKey(*self, a.positional[0]);
      if (it != self->dict.end()) return it->second;
      const Value v = a.positional.size() > 1 ? a.positional[1] : none();
      putEntry(*self, a.positional[0], v);
      return v;
    });
  }
  if (name == "popitem") {
    return boundMethod(obj, "popitem", [](const Value& self, CallArgs& a) {
      checkArguments(a, Takes{}, "dict.popitem");
      if (self->dict.empty()) throw RuntimeFailure("KeyError: 'popitem(): dictionary is empty'");
      auto [k, v] = self->dict.back();  // the last added, as Python's
      eraseEntry(*self, self->dict.end() - 1);
      return tuple({k, v});
    });
  }
  if (name == "clear" || name == "copy") {
    return boundMethod(obj, name, [name](const Value& self, CallArgs& a) {
      checkArguments(a, Takes{}, "dict." + name);
      if (name == "copy") {
        return dict(self->dict);
      }
      clearEntries(*self);
      return none();
    });
  }
  return nullptr;
}

// The dict methods scripts use; null for a name that is none.
Value dictMethod(const Value& obj, const std::string& name) {
  if (name == "keys" || name == "values" || name == "items") {
    const Type kind = name == "keys"     ? Type::DictKeys
                      : name == "values" ? Type::DictValues
                                         : Type::DictItems;
    return boundMethod(obj, name,
                       [kind](const Value& self, CallArgs&) { return dictView(kind, self); });
  }
  if (name == "get") {
    return boundMethod(obj, "get", [](const Value& self, CallArgs& a) {
      const auto it = findKey(*self, a.required(0));
      if (it != self->dict.end()) return it->second;
      return a.positional.size() > 1 ? a.positional[1] : none();
    });
  }
  return dictEdit(obj, name);
}

}  // namespace

Value boundMethodOf(const Value& receiver, const std::string& name) {
  switch (receiver->type) {
    case Type::List:
      return listMethod(receiver, name);
    case Type::Tuple:
      return name == "index" || name == "count" ? sequenceSearch(receiver, name) : nullptr;
    case Type::Size:  // a tuple of ints, and its product
      if (name == "numel")
        return boundMethod(receiver, "numel", [](const Value& self, CallArgs& a) {
          builtin_args::checkArguments(a, builtin_args::Takes{}, "torch.Size.numel");
          long long n = 1;
          for (const Value& d : self->items)
            if (__builtin_mul_overflow(n, asInt(d, "dimension"), &n))
              throw RuntimeFailure("torch.Size.numel(): the product overflows 64 bits");
          return integer(n);
        });
      return name == "index" || name == "count" ? sequenceSearch(receiver, name) : nullptr;
    case Type::Dict:
      return dictMethod(receiver, name);
    default:
      return nullptr;
  }
}

Value Interpreter::getAttr(const Value& obj, const std::string& name) {
  if (obj->type == Type::Deferred) {
    if (Value later = deferredMethod(obj, name)) return later;
    force(obj);
  }
  switch (obj->type) {
    case Type::Module:
      return host_.moduleAttribute(*this, obj, name);
    case Type::Tracer:
      return host_.tracerAttribute(*this, obj, name);
    case Type::Tensor:
      return tensorAttribute(*this, obj, name);
    case Type::List:
    case Type::Tuple:
    case Type::Size:
    case Type::Dict:
      if (obj->fields) {  // torch.return_types: `.values`, `.indices`
        const auto& f = *obj->fields;
        const auto it = std::find(f.begin(), f.end(), name);
        if (it != f.end()) return obj->items.at(size_t(it - f.begin()));
      }
      if (Value method = boundMethodOf(obj, name)) return method;
      break;
    case Type::Str:
      if (Value method = strMethodOf(obj, name)) return method;
      break;
    case Type::Device: {
      const c10::Device d(obj->str);
      if (name == "type") return string(c10::DeviceTypeName(d.type(), /*lower_case=*/true));
      if (name == "index") return d.has_index() ? integer(d.index()) : none();
      fail("'torch.device' object has no attribute '" + name + "' (it has: type, index)");
    }
    default:
      break;
  }
  if (obj->type == Type::ResultObject || obj->type == Type::Namespace) {
    auto it = obj->attributes.find(name);
    if (it != obj->attributes.end()) return it->second;
    std::string known;
    for (const auto& [k, v] : obj->attributes) known += (known.empty() ? "" : ", ") + k;
    fail("'" + obj->str + "' has no attribute '" + name + "' (it has: " + known + ")");
  }
  fail(std::string("'") + typeName(obj->type) + "' object has no attribute '" + name + "'");
}

Value Interpreter::getItem(const Value& obj, const Value& index) {
  if (obj->type == Type::Deferred) {
    if (Value later = deferredIndex(obj, index)) return later;
    force(obj);
  }
  switch (obj->type) {
    case Type::Tuple:
    case Type::List:
    case Type::Size:
    case Type::Str: {
      const size_t n = obj->type == Type::Str ? obj->str.size() : obj->items.size();
      if (index->type == Type::Slice) {
        const auto idx = sliceIndices(index, n);
        // the slice's references (or characters) are the budget's: x[:] forty times made them free
        chargeMemory(int64_t(idx.size() * (obj->type == Type::Str ? 1 : sizeof(Value))));
        if (obj->type == Type::Str) {
          std::string s;
          for (long long i : idx) s += obj->str[i];
          return string(s);
        }
        std::vector<Value> items;
        for (long long i : idx) items.push_back(obj->items[i]);
        if (obj->type == Type::Size) {
          auto v = std::make_shared<Object>(*obj);
          v->items = items;
          return v;
        }
        return obj->type == Type::List ? list(items) : tuple(items);
      }
      const long long k = normalizeIndex(asInt(index, "index"), n);
      return obj->type == Type::Str ? string(std::string(1, obj->str[k])) : obj->items[k];
    }
    case Type::Dict: {
      const auto it = findKey(*obj, index);
      if (it == obj->dict.end()) fail("key " + repr(index) + " not found");
      return it->second;
    }
    case Type::Tensor: {
      const auto indices = tensorIndices(index);
      requestMemory(indexedBytes(obj->tensor, indices));  // what index tensors gather
      const at::Tensor r = obj->tensor.index(indices);
      // Slicing gives a view of x; an index tensor or list gathers a new tensor.
      return r.is_alias_of(obj->tensor) ? tensor(r) : charged(tensor(r));
    }
    case Type::Module:
      return host_.moduleIndex(*this, obj, asInt(index, "module index"));
    case Type::IterRange: {
      auto r = std::make_shared<Object>(*obj);
      if (index->type == Type::Slice) {
        if (index->items[2]->type != Type::None && asInt(index->items[2], "step") != 1)
          fail("tracer.iter does not take a step");
        r->rangeStart =
            index->items[0]->type == Type::None ? 0 : asInt(index->items[0], "first step");
        r->unbounded = index->items[1]->type == Type::None;
        r->rangeStop = r->unbounded ? -1 : asInt(index->items[1], "last step");
      } else {
        r->rangeStart = asInt(index, "step");
        r->rangeStop = r->rangeStart + 1;
      }
      if (r->rangeStart < 0 || (!r->unbounded && r->rangeStop < r->rangeStart))
        fail("tracer.iter takes steps >= 0");
      r->str = "range";
      return r;
    }
    case Type::Range:
      return integer(obj->rangeStart +
                     normalizeIndex(asInt(index, "index"), size_t(rangeLength(*obj))) *
                         obj->rangeStep);
    default:
      fail(std::string("'") + typeName(obj->type) + "' object is not subscriptable");
  }
}

void Interpreter::setItem(const Value& obj, const Value& index, const Value& v) {
  switch (obj->type) {
    case Type::List:
      if (index->type == Type::Slice) return setSlice(obj, index, v);
      noteStored(obj, v);
      obj->items[normalizeIndex(asInt(index, "index"), obj->items.size())] = v;
      return;
    case Type::Dict:
      putEntry(*obj, index, v);  // first: an unhashable key is refused before anything is noted
      noteStored(obj, index);
      noteStored(obj, v);
      return;
    case Type::Tensor: {
      noteTensorWrite();
      const auto idx = tensorIndices(index);
      if (v->type == Type::Tensor) {
        if (v->tensor.scalar_type() != obj->tensor.scalar_type() &&
            host_.viewsModelMemory(obj->tensor))
          fail("cannot write a tensor of dtype " + dtypeRepr(v->tensor.scalar_type()) +
               " into a port value of dtype " + dtypeRepr(obj->tensor.scalar_type()) +
               "; convert it first with .to(" + dtypeRepr(obj->tensor.scalar_type()) + ")");
        at::Tensor target = obj->tensor.index(idx);
        if (!target.sizes().equals(v->tensor.sizes()) && v->tensor.numel() != 1) {
          // Broadcasting as torch would, but a clear message when it cannot.
          try {
            obj->tensor.index_put_(idx, v->tensor.to(obj->tensor.options()));
          } catch (const c10::Error&) {
            fail("cannot write a tensor of shape " + repr(sizeOf(v->tensor)) +
                 " into a slice of shape " + repr(sizeOf(target)));
          }
          return;
        }
        obj->tensor.index_put_(idx, v->tensor.to(obj->tensor.options()));
      } else {
        obj->tensor.index_put_(idx, asNumber(v, "value"));
      }
      return;
    }
    default:
      fail(std::string("'") + typeName(obj->type) + "' object does not support item assignment");
  }
}

// `list[a:b] = v` replaces the items a .. b-1 with those of any iterable (as many as it has);
// `list[a:b:k] = v` with k != 1 replaces the items it selects, one for one. The values are read
// first, so `x[1:] = x` works.
void Interpreter::setSlice(const Value& list, const Value& slice, const Value& v) {
  const SliceBounds b = sliceBounds(slice, list->items.size());
  std::vector<Value> values;
  try {
    values = elementsOf(v, *this);
  } catch (const RuntimeFailure&) {
    throw RuntimeFailure(b.step == 1 ? "can only assign an iterable"
                                     : "must assign iterable to extended slice");
  }
  for (const Value& x : values) noteStored(list, x);
  auto& items = list->items;
  if (b.step == 1) {
    requestMemory(int64_t((items.size() + values.size()) * sizeof(Value)));
    const auto first = items.begin() + b.start;
    items.insert(items.erase(first, first + b.length), values.begin(), values.end());
    return;
  }
  if ((long long)values.size() != b.length)
    throw RuntimeFailure("attempt to assign sequence of size " + std::to_string(values.size()) +
                         " to extended slice of size " + std::to_string(b.length));
  for (long long k = 0; k < b.length; ++k) items[size_t(b.start + k * b.step)] = values[size_t(k)];
}

// `del obj[index]`: an item or a slice of a list, a key of a dict.
void Interpreter::delItem(const Value& obj, const Value& index) {
  switch (obj->type) {
    case Type::List: {
      auto& items = obj->items;
      if (index->type != Type::Slice) {
        items.erase(items.begin() + normalizeIndex(asInt(index, "index"), items.size()));
        return;
      }
      const SliceBounds b = sliceBounds(index, items.size());
      std::vector<bool> gone(items.size(), false);
      for (long long k = 0; k < b.length; ++k) gone[size_t(b.start + k * b.step)] = true;
      size_t kept = 0;
      for (size_t i = 0; i < items.size(); ++i) {
        if (!gone[i]) items[kept++] = items[i];
      }
      items.resize(kept);
      return;
    }
    case Type::Dict: {
      auto& entries = obj->dict;
      const auto it = findKey(*obj, index);
      if (it == entries.end()) fail("key " + repr(index) + " not found");
      eraseEntry(*obj, it);
      return;
    }
    default:
      fail(std::string("'") + typeName(obj->type) + "' object doesn't support item deletion");
  }
}

}  // namespace shardscope::trace
