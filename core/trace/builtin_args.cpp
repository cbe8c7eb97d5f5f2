#include "builtin_args.h"

#include "../error.h"

namespace shardscope::trace::builtin_args {

Interpreter& interpreterOf(const Args& a) {
  SS_ASSERT(a.interpreter, a.callee + "() was called without its interpreter");
  return *a.interpreter;
}

void onlyKeywords(const Args& a, const std::vector<const char*>& taken, const char* fn) {
  for (const auto& [name, value] : a.keywords) {
    bool known = false;
    for (const char* t : taken) known = known || name == t;
    if (!known)
      throw RuntimeFailure(std::string(fn) + "() got an unexpected keyword argument '" + name +
                           "'");
  }
}

Value arg(const Args& a, size_t i, const char* name, const char* fn) {
  const Value* v = a.get(i, name);
  if (!v) throw RuntimeFailure(std::string(fn) + "() missing argument '" + name + "'");
  return *v;
}
Value optional(const Args& a, size_t i, const char* name, Value dflt) {
  const Value* v = a.get(i, name);
  return v ? *v : dflt;
}

std::vector<int64_t> shapeArgs(const Args& a, size_t from) {
  std::vector<int64_t> shape;
  if (a.positional.size() == from + 1 &&
      (a.positional[from]->type == Type::Tuple || a.positional[from]->type == Type::List ||
       a.positional[from]->type == Type::Size)) {
    for (const auto& v : a.positional[from]->items) shape.push_back(asInt(v, "dimension"));
    return shape;
  }
  for (size_t i = from; i < a.positional.size(); ++i)
    shape.push_back(asInt(a.positional[i], "dimension"));
  return shape;
}

std::vector<at::Tensor> tensorList(const Value& v, const char* fn) {
  if (v->type != Type::Tuple && v->type != Type::List)
    throw RuntimeFailure(std::string(fn) + "() expects a list of tensors");
  std::vector<at::Tensor> out;
  for (const auto& i : v->items) out.push_back(toTensor(i));
  return out;
}

const std::map<std::string, at::ScalarType>& dtypes() {
  static const std::map<std::string, at::ScalarType> m = {
      {"float32", at::kFloat}, {"float", at::kFloat},       {"float16", at::kHalf},
      {"half", at::kHalf},     {"bfloat16", at::kBFloat16}, {"float64", at::kDouble},
      {"double", at::kDouble}, {"int64", at::kLong},        {"long", at::kLong},
      {"int32", at::kInt},     {"int", at::kInt},           {"bool", at::kBool},
      {"uint8", at::kByte}};
  return m;
}

Value dtypeValue(at::ScalarType t) {
  for (const auto& [name, s] : dtypes()) {
    if (s == t && name != "float" && name != "half" && name != "double" && name != "long" &&
        name != "int") {
      auto v = std::make_shared<Object>();
      v->type = Type::Namespace;
      v->str = "torch." + name;
      return v;
    }
  }
  return string(c10::toString(t));
}

std::optional<at::ScalarType> asDtype(const Value& v) {
  if (v->type != Type::Namespace || v->str.rfind("torch.", 0) != 0) return std::nullopt;
  auto it = dtypes().find(v->str.substr(6));
  if (it == dtypes().end()) return std::nullopt;
  return it->second;
}

long long dimArg(const Args& a, size_t i, long long dflt) {
  const Value* v = a.get(i, "dim");
  return v && (*v)->type != Type::None ? asInt(*v, "dim") : dflt;
}
bool keepdim(const Args& a, size_t i) {
  const Value* v = a.get(i, "keepdim");
  return v && truthy(*v);
}

Value valuesIndices(const std::tuple<at::Tensor, at::Tensor>& r) {
  return tuple({tensor(std::get<0>(r)), tensor(std::get<1>(r))});
}

Value fromTensorList(const at::Tensor& t) {
  if (t.dim() == 0) {
    if (t.scalar_type() == at::kBool) return boolean(t.item<bool>());
    if (at::isFloatingType(t.scalar_type())) return floating(t.item<double>());
    return integer(t.item<int64_t>());
  }
  std::vector<Value> items;
  for (int64_t i = 0; i < t.size(0); ++i) items.push_back(fromTensorList(t[i]));
  return list(items);
}

}  // namespace shardscope::trace::builtin_args
