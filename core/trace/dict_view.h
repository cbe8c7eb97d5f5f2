// Views of a dict: d.keys(), d.values() and d.items(), as Python's. A view holds its dict and reads
// it whenever it is used, so a view taken before the dict changes shows the change. Views print as
// Python prints them (dict_keys(['a', 'b'])), iterate, have len(), bool() and `in`, and are not
// subscriptable; keys and items views compare equal as sets do (order aside). Python's set
// operators on views (&, |, -, ^, <, isdisjoint) are not supported.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "value.h"

namespace shardscope::trace {

// A view of `dict`; `kind` is Type::DictKeys, DictValues or DictItems.
Value dictView(Type kind, Value dict);
bool isDictView(Type t);
// The dict a view reads.
const Value& viewedDict(const Object& view);
// What a view of kind `kind` yields for one of its dict's entries: the key, the value, or a
// (key, value) tuple.
Value viewElement(Type kind, const std::pair<Value, Value>& entry);
// What iterating the view yields now, in the dict's order.
std::vector<Value> viewElements(const Object& view);
// `x in view`: a key, a value, or a (key, value) pair of the dict.
bool viewContains(const Object& view, const Value& x);
// dict_keys([...]), dict_values([...]), dict_items([...]).
std::string viewRepr(const Object& view);
// `a == b` for two views: keys and items views as sets (the same elements, in any order); a values
// view equals only itself, as in Python.
bool viewsEqual(const Value& a, const Value& b);

}  // namespace shardscope::trace
