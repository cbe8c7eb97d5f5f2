#include "builtin_args.h"

#include <algorithm>

#include "../error.h"
#include "result_sizes.h"
#include "trace_device.h"

namespace shardscope::trace::builtin_args {

Interpreter& interpreterOf(const Args& a) {
  SS_ASSERT(a.interpreter, a.callee + "() was called without its interpreter");
  return *a.interpreter;
}

void requestTensor(const Args& a, c10::ArrayRef<int64_t> sizes, at::ScalarType dtype) {
  interpreterOf(a).requestMemory(tensorBytes(sizes, dtype));
}

namespace {

// "a, b, c": the names a function takes, for its error messages.
std::string listed(const std::vector<const char*>& names) {
  std::string out;
  for (const char* n : names) out += (out.empty() ? "" : ", ") + std::string(n);
  return out;
}

// "1 argument", "2 arguments".
std::string arguments(size_t n) {
  return std::to_string(n) + " argument" + (n == 1 ? "" : "s");
}

// CPython's words for `given` positional arguments where `takes` asks for another count, in the
// styles other than Arity::Named; empty when the count is right.
std::string countError(const Takes& takes, size_t given, const std::string& fn) {
  const size_t least = takes.required, most = takes.positional;
  if (given >= least && given <= most) return "";
  if (takes.arity == Arity::ExactlyOne)
    return fn + "() takes exactly one argument (" + std::to_string(given) + " given)";
  const std::string bound = least == most ? "" : given < least ? "at least " : "at most ";
  // Argument Clinic names a method bare: "center expected ...", where its others say
  // "str.center()".
  return fn.substr(fn.rfind('.') + 1) + " expected " + bound +
         arguments(given < least ? least : most) + ", got " + std::to_string(given);
}

}  // namespace

void checkArguments(const Args& a, const Takes& takes, const std::string& fn) {
  const size_t given = a.positional.size();
  const std::vector<const char*> keywords(
      takes.keywords.begin() +
          std::ptrdiff_t(std::min(takes.positionalOnly, takes.keywords.size())),
      takes.keywords.end());
  // A builtin whose parameters are all positional-only refuses any keyword before it counts, as
  // Python's do.
  if (!a.keywords.empty() && takes.positionalOnly > 0 && keywords.empty())
    throw RuntimeFailure(fn + "() takes no keyword arguments");
  if (takes.arity != Arity::Named) {
    if (const std::string e = countError(takes, given, fn); !e.empty()) throw RuntimeFailure(e);
  }
  if (given > takes.positional)
    throw RuntimeFailure(fn + "() takes at most " + std::to_string(takes.positional) +
                         " positional argument" + (takes.positional == 1 ? "" : "s") + " (" +
                         std::to_string(given) + " given)");
  for (const auto& [name, value] : a.keywords) {
    const auto it = std::find(takes.keywords.begin(), takes.keywords.end(), name);
    if (it == takes.keywords.end())
      throw RuntimeFailure(
          fn + "() got an unexpected keyword argument '" + name + "'; " +
          (keywords.empty() ? "it takes no keyword arguments" : "it takes " + listed(keywords)));
    const size_t index = size_t(it - takes.keywords.begin());
    if (index < takes.positionalOnly) {
      if (given <= index && index < takes.required) continue;  // Python reports it missing, below
      throw RuntimeFailure("'" + name + "' is an invalid keyword argument for " + fn + "()");
    }
    if (takes.positional != kVarargs && index < std::min(takes.positional, given))
      throw RuntimeFailure(fn + "() got multiple values for argument '" + name +
                           "': it is also given by position (argument " +
                           std::to_string(index + 1) + ")");
  }
  for (size_t i = 0; i < takes.required; ++i) {
    if (i >= given && i < takes.positionalOnly)
      throw RuntimeFailure(fn + "() takes at least " + std::to_string(i + 1) +
                           " positional argument" + (i == 0 ? "" : "s") + " (" +
                           std::to_string(given) + " given)");
    if (i >= given && !a.keyword(takes.keywords[i]))
      throw RuntimeFailure(fn + "() is missing its '" + takes.keywords[i] + "' (argument " +
                           std::to_string(i + 1) + ")");
  }
}

Value strictBuiltin(std::string name, Takes takes, BuiltinFn fn) {
  SS_ASSERT(takes.required <= takes.keywords.size(),
            name + "(): more required arguments than names");
  return builtin(name, [name, takes = std::move(takes), fn = std::move(fn)](Args& a) {
    checkArguments(a, takes, name);
    return fn(a);
  });
}

Value strictBuiltin(std::string name, size_t positional, std::vector<const char*> keywords,
                    BuiltinFn fn) {
  return strictBuiltin(std::move(name), Takes{positional, std::move(keywords)}, std::move(fn));
}

Value arg(const Args& a, size_t i, const char* name, const std::string& fn) {
  const Value* v = a.get(i, name);
  if (!v)
    throw RuntimeFailure(fn + "() is missing its '" + name + "' (argument " +
                         std::to_string(i + 1) + ")");
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

std::vector<int64_t> shapeArg(const Args& a, const char* keyword, const std::string& fn) {
  const Value* given = a.keyword(keyword);
  if (!given) return shapeArgs(a, 0);
  if (!a.positional.empty())
    throw RuntimeFailure(fn + "() got multiple values for argument '" + keyword +
                         "': it is also given by position");
  Args one;
  one.positional = {*given};
  return shapeArgs(one, 0);
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
      {"uint8", at::kByte},    {"int8", at::kChar},         {"int16", at::kShort},
      {"short", at::kShort}};
  return m;
}

Value dtypeValue(at::ScalarType t) {
  for (const auto& [name, s] : dtypes()) {
    if (s == t && name != "float" && name != "half" && name != "double" && name != "long" &&
        name != "int" && name != "short") {
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

c10::optional<at::ScalarType> dtypeArg(const Value* v, const std::string& fn) {
  if (!v || (*v)->type == Type::None) return c10::nullopt;
  if (auto t = asDtype(*v)) return *t;
  throw RuntimeFailure(fn + "(): dtype must be a torch dtype such as torch.float32, got " +
                       repr(*v));
}

c10::optional<c10::Device> deviceNamed(const std::string& name) {
  const size_t colon = name.find(':');
  const std::string type = name.substr(0, colon);
  if (type != "cpu" && type != "cuda") return c10::nullopt;
  if (colon == std::string::npos) return c10::Device(type);
  const std::string index = name.substr(colon + 1);
  if (index.empty() || index.size() > 3 ||
      index.find_first_not_of("0123456789") != std::string::npos || std::stoi(index) > 127)
    return c10::nullopt;
  return c10::Device(name);
}

c10::optional<c10::Device> deviceArg(const Value* v, const std::string& fn) {
  if (!v || (*v)->type == Type::None) return c10::nullopt;
  // Every rank answers alike (an error on one rank only would leave the others in a collective):
  // any CUDA device names the rank's own, and the message names no rank's device.
  const c10::Device here = currentDevice();
  const std::string works = here.is_cpu() ? "'cpu'" : "'cpu' or 'cuda' (the rank's GPU)";
  if ((*v)->type != Type::Str && (*v)->type != Type::Device)
    throw RuntimeFailure(fn + "(): device must be a torch.device or a string such as " + works +
                         ", got " + repr(*v));
  const std::string& name = (*v)->str;
  const c10::optional<c10::Device> named = deviceNamed(name);
  if (named && named->is_cpu()) return c10::Device(c10::kCPU);
  if (named && here.is_cuda()) return here;
  throw RuntimeFailure(fn + "(): device='" + name +
                       "' is not where this script's tensors live: device= takes " + works);
}

long long dimArg(const Args& a, size_t i, long long dflt, const char* name) {
  const Value* v = a.get(i, name);
  return v && (*v)->type != Type::None ? asInt(*v, name) : dflt;
}
c10::optional<int64_t> optionalDim(const Args& a, size_t i) {
  const Value* v = a.get(i, "dim");
  if (!v || (*v)->type == Type::None) return c10::nullopt;
  return asInt(*v, "dim");
}
std::optional<std::vector<int64_t>> dimsArg(const Args& a, size_t i) {
  const Value* v = a.get(i, "dim");
  if (!v || (*v)->type == Type::None) return std::nullopt;
  if ((*v)->type != Type::Tuple && (*v)->type != Type::List)
    return std::vector<int64_t>{asInt(*v, "dim")};
  std::vector<int64_t> dims;
  for (const Value& d : (*v)->items) dims.push_back(asInt(d, "dim"));
  return dims;
}
bool keepdim(const Args& a, size_t i) {
  return flag(a, i, "keepdim", false);
}
bool flag(const Args& a, size_t i, const char* name, bool dflt) {
  const Value* v = a.get(i, name);
  return v ? truthy(*v) : dflt;
}

Value valuesIndices(const char* op, const std::tuple<at::Tensor, at::Tensor>& r) {
  static const auto names = std::make_shared<const std::vector<std::string>>(
      std::vector<std::string>{"values", "indices"});
  Value t = tuple({tensor(std::get<0>(r)), tensor(std::get<1>(r))});
  t->str = std::string("torch.return_types.") + op;
  t->fields = names;
  return t;
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
