// Views of a dict (dict_view.h): each reads the dict it holds in items[0] when used.
#include "dict_view.h"

#include <algorithm>

namespace shardscope::trace {

Value dictView(Type kind, Value dict) {
  auto v = std::make_shared<Object>();
  v->type = kind;
  v->items.push_back(std::move(dict));
  return v;
}

bool isDictView(Type t) {
  return t == Type::DictKeys || t == Type::DictValues || t == Type::DictItems;
}

const Value& viewedDict(const Object& view) {
  return view.items.at(0);
}

Value viewElement(Type kind, const std::pair<Value, Value>& entry) {
  if (kind == Type::DictValues) return entry.second;
  if (kind == Type::DictItems) return tuple({entry.first, entry.second});
  return entry.first;
}

std::vector<Value> viewElements(const Object& view) {
  std::vector<Value> out;
  for (const auto& entry : viewedDict(view)->dict) out.push_back(viewElement(view.type, entry));
  return out;
}

bool viewContains(const Object& view, const Value& x) {
  const auto& entries = viewedDict(view)->dict;
  const auto has = [&](const auto& match) {
    return std::any_of(entries.begin(), entries.end(), match);
  };
  switch (view.type) {
    case Type::DictKeys:
      return findKey(*viewedDict(view), x) != entries.end();
    case Type::DictValues:
      return has([&](const auto& kv) { return pythonEquals(kv.second, x); });
    default: {  // items: a (key, value) tuple whose key maps to that value
      if (x->type != Type::Tuple || x->items.size() != 2) return false;
      const auto it = findKey(*viewedDict(view), x->items[0]);
      return it != entries.end() && pythonEquals(it->second, x->items[1]);
    }
  }
}

std::string viewRepr(const Object& view) {
  std::string s = std::string(typeName(view.type)) + "([";
  const std::vector<Value> elements = viewElements(view);
  for (size_t i = 0; i < elements.size(); ++i) s += (i ? ", " : "") + repr(elements[i]);
  return s + "])";
}

bool viewsEqual(const Value& a, const Value& b) {
  if (a == b) return true;
  if (a->type == Type::DictValues || b->type == Type::DictValues) return false;
  const std::vector<Value> mine = viewElements(*a);
  if (mine.size() != viewedDict(*b)->dict.size()) return false;
  return std::all_of(mine.begin(), mine.end(), [&](const Value& x) { return viewContains(*b, x); });
}

}  // namespace shardscope::trace
