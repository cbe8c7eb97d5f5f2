#include "driver_values.h"

#include <algorithm>
#include <map>

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

}  // namespace

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
