#include "driver_values.h"

#include <algorithm>
#include <map>
#include <unordered_set>

#include "../host_tensor_conversion.h"
#include "dict_view.h"
#include "trace_device.h"

namespace shardscope::trace {
namespace {

// One rank's copy of a value of the driver's scope. A value reached twice (a list under two names,
// a dict and a view of it, a list that holds itself) is copied once, so the copies alias as the
// originals do.
Value capture(const Value& v, std::map<const Object*, Value>& copies) {
  if (const auto it = copies.find(v.get()); it != copies.end()) return it->second;
  const char* const during =
      "while copying a value into the trace block: it nests lists, tuples or dicts too deeply "
      "(1000 levels at most)";
  switch (v->type) {
    case Type::Tensor:
      return copies[v.get()] = tensor(v->tensor.to(currentDevice()).clone());
    case Type::Tuple:
    case Type::List: {
      NestingGuard nest(during);
      Value c = v->type == Type::List ? list({}) : tuple({});
      copies[v.get()] = c;  // before the items: one may be this value itself
      for (const auto& i : v->items) c->items.push_back(capture(i, copies));
      return c;
    }
    case Type::Dict: {
      NestingGuard nest(during);
      auto d = std::make_shared<Object>(*v);
      copies[v.get()] = d;
      for (auto& kv : d->dict) kv.second = capture(kv.second, copies);
      return d;
    }
    case Type::DictKeys:
    case Type::DictValues:
    case Type::DictItems: {
      NestingGuard nest(during);
      Value c = dictView(v->type, nullptr);
      copies[v.get()] = c;
      c->items[0] = capture(viewedDict(*v), copies);
      return c;
    }
    default:
      return v;
  }
}

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

// `v` with the host copies of its device tensors. Tuples, lists, dicts and dict views are copied,
// on any device alike (a saved list and a saved dict that holds it alias in the driver as in the
// block). A value met twice (two names of one list, a dict and a view of it, a list that holds
// itself) is rebuilt once, so the copies alias as the originals do.
class HostRebuild {
 public:
  explicit HostRebuild(std::map<const Object*, at::Tensor> host) : host_(std::move(host)) {}

  Value operator()(const Value& v) {
    if (const auto it = rebuilt_.find(v.get()); it != rebuilt_.end()) return it->second;
    switch (v->type) {
      case Type::Tensor: {
        const auto it = host_.find(v.get());
        if (it == host_.end()) return v;
        auto c = tensor(it->second);
        c->saved = v->saved;
        return rebuilt_[v.get()] = c;
      }
      case Type::Tuple:
      case Type::List: {
        NestingGuard nest(kNesting);
        Value c = v->type == Type::List ? list({}) : tuple({});
        c->saved = v->saved;
        rebuilt_[v.get()] = c;  // before the items: one may be this value itself
        c->items.reserve(v->items.size());
        for (const auto& i : v->items) c->items.push_back((*this)(i));
        return c;
      }
      case Type::Dict: {
        NestingGuard nest(kNesting);
        auto c = std::make_shared<Object>(*v);
        rebuilt_[v.get()] = c;
        for (auto& [k, i] : c->dict) {
          k = (*this)(k);
          i = (*this)(i);
        }
        return c;
      }
      case Type::DictKeys:
      case Type::DictValues:
      case Type::DictItems: {
        NestingGuard nest(kNesting);
        Value c = dictView(v->type, nullptr);
        c->saved = v->saved;
        rebuilt_[v.get()] = c;
        c->items[0] = (*this)(viewedDict(*v));
        return c;
      }
      default:
        return v;
    }
  }

 private:
  static constexpr const char* kNesting =
      "while copying a saved value out of the trace block: it nests lists, tuples or dicts too "
      "deeply (1000 levels at most)";

  std::map<const Object*, at::Tensor> host_;
  std::map<const Object*, Value> rebuilt_;
};

}  // namespace

std::map<std::string, Value> savedOnHost(const std::map<std::string, Value>& saved) {
  std::vector<const Object*> leaves;
  for (const auto& [name, v] : saved) deviceLeaves(v, leaves);
  std::sort(leaves.begin(), leaves.end());
  leaves.erase(std::unique(leaves.begin(), leaves.end()), leaves.end());  // a value under two names
  HostRebuild rebuild(moveToHost(leaves));
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
  std::map<const Object*, Value> copies;
  for (auto& inv : invokes) {
    for (auto& [k, v] : inv.captured) {
      try {
        v = capture(v, copies);
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
