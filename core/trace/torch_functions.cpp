// The `torch` namespace of trace scripts: dtypes, constructors (zeros, arange, tensor, ...), the
// tensor functions scripts use (softmax, topk, cat, allclose, ...) and torch.nn.functional. This
// is the documented list (docs/trace-language.md). Each function takes PyTorch's argument names
// for what is implemented here and refuses any other keyword or positional argument
// (builtin_args::checkArguments): torch.zeros(3, dtyp=torch.float16) is an error, not fp32.
// Functions that are also tensor methods (torch.topk(x, k) is x.topk(k)) run the method's entry
// (tensor_methods.cpp), so the two read their arguments alike.
#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "../error.h"
#include "builtin_args.h"
#include "interpreter.h"
#include "result_sizes.h"
#include "tensor_methods.h"
#include "trace_device.h"

namespace shardscope::trace {

using namespace builtin_args;

namespace {

Value makeNamespace(const std::string& name, std::map<std::string, Value> members) {
  auto v = std::make_shared<Object>();
  v->type = Type::Namespace;
  v->str = name;
  v->attributes = std::move(members);
  return v;
}

// `shown`(input, ...): the tensor method `method` of input, taking what the method takes after
// `input` (torch.topk(input, k, dim, largest, sorted) is input.topk(k, dim, largest, sorted)).
Value fromMethod(const std::string& shown, const char* method) {
  const TensorMethod* m = tensorMethod(method);
  SS_ASSERT(m, shown + "() names no tensor method '" + method + "'");
  // A method that takes its shape dimension by dimension (reshape, permute) takes it whole here,
  // as torch.reshape(input, shape) does: two positional arguments.
  const size_t positional = m->takes.positional == kVarargs ? 2 : m->takes.positional + 1;
  Takes takes{positional, {"input"}, m->takes.required + 1};
  takes.keywords.insert(takes.keywords.end(), m->takes.keywords.begin(), m->takes.keywords.end());
  const bool wholeShape = m->takes.positional == kVarargs;
  const std::string shapeName = m->takes.keywords.empty() ? "shape" : m->takes.keywords.front();
  return strictBuiltin(shown, std::move(takes), [m, shown, wholeShape, shapeName](Args& a) {
    const at::Tensor input = toTensor(arg(a, 0, "input", shown));
    if (wholeShape) {  // torch.reshape(x, 6) is torch's TypeError, where x.reshape(6) is not
      const Value* shape = a.get(1, shapeName);
      const bool sequence = shape && ((*shape)->type == Type::Tuple ||
                                      (*shape)->type == Type::List || (*shape)->type == Type::Size);
      if (shape && !sequence)
        throw RuntimeFailure(shown.substr(shown.rfind('.') + 1) + "(): argument '" + shapeName +
                             "' (position 2) must be tuple of ints, not " +
                             typeName((*shape)->type));
    }
    Args rest = a;  // the method's own arguments: without `input`
    if (!rest.positional.empty()) {
      rest.positional.erase(rest.positional.begin());
    } else {
      rest.keywords.erase(std::remove_if(rest.keywords.begin(), rest.keywords.end(),
                                         [](const auto& k) { return k.first == "input"; }),
                          rest.keywords.end());
    }
    return m->call(input, rest);
  });
}

// New tensors are made on the rank's device unless device='cpu' says otherwise (deviceArg).
at::Device deviceOf(const Args& a, const std::string& fn) {
  return deviceArg(a.keyword("device"), fn).value_or(currentDevice());
}

// torch.device('cuda'), torch.device('cuda:0'), torch.device('cuda', 0), torch.device(0) (the
// first GPU), torch.device(d): the devices tensors live on here, CPU and CUDA (deviceArg maps any
// CUDA index to the rank's GPU).
Value makeDevice(Args& a) {
  const Value& what = arg(a, 0, "type", "torch.device");
  const Value* index = a.get(1, "index");
  const bool indexed = index && (*index)->type != Type::None;
  if (what->type == Type::Device && !indexed) return what;
  std::string name;
  if (what->type == Type::Int && !indexed) {
    name = "cuda:" + std::to_string(what->intValue);
  } else if (what->type == Type::Str) {
    name = what->str;
    if (indexed && name.find(':') != std::string::npos)
      throw RuntimeFailure("torch.device(): '" + name +
                           "' names its index already: give it once, 'cuda:0' or ('cuda', 0)");
    if (indexed && (*index)->type != Type::Int)
      throw RuntimeFailure("torch.device(): the index must be an int, got " + repr(*index));
    if (indexed) name += ":" + std::to_string((*index)->intValue);
  } else {
    throw RuntimeFailure("torch.device() expects a string such as 'cpu', 'cuda' or 'cuda:0', got " +
                         repr(what));
  }
  const c10::optional<c10::Device> d = deviceNamed(name);
  if (!d)
    throw RuntimeFailure("torch.device(): '" + name +
                         "' is not a device tensors live on here: 'cpu', 'cuda' or 'cuda:N' (N "
                         "in 0..127, c10's device index)");
  return deviceValue(*d);
}

Value filled(Args& a, const std::string& fn, double value) {
  at::TensorOptions o = at::TensorOptions().device(deviceOf(a, fn));
  o = o.dtype(dtypeArg(a.keyword("dtype"), fn).value_or(at::kFloat));
  const std::vector<int64_t> sizes = shapeArg(a, "size", fn);
  requestTensor(a, sizes, o.dtype().toScalarType());
  return tensor(at::full(sizes, value, o));
}

Value filledLike(Args& a, const std::string& fn, double value) {
  const at::Tensor x = toTensor(arg(a, 0, "input", fn));
  at::TensorOptions o = x.options();
  if (const auto dtype = dtypeArg(a.keyword("dtype"), fn)) o = o.dtype(*dtype);
  if (const auto device = deviceArg(a.keyword("device"), fn)) o = o.device(*device);
  requestTensor(a, x.sizes(), o.dtype().toScalarType());
  return tensor(at::full_like(x, value, o));
}

// arange(end) or arange(start, end, step=1): int64 from ints, float32 (torch's default dtype)
// when any of them is a float, unless dtype= says otherwise.
Value arange(Args& a) {
  const bool endOnly = a.positional.size() == 1 && !a.keyword("end");
  const Value bounds[3] = {endOnly ? integer(0) : optional(a, 0, "start", integer(0)),
                           endOnly ? a.positional[0] : arg(a, 1, "end", "torch.arange"),
                           optional(a, 2, "step", integer(1))};
  const char* names[3] = {"start", "end", "step"};
  bool anyFloat = false;
  at::Scalar s[3];
  for (int i = 0; i < 3; ++i) {
    anyFloat |= bounds[i]->type == Type::Float;
    s[i] = bounds[i]->type == Type::Float ? at::Scalar(asNumber(bounds[i], names[i]))
                                          : at::Scalar(int64_t(asInt(bounds[i], names[i])));
  }
  if (s[2].toDouble() == 0) throw RuntimeFailure("torch.arange(): step must not be zero");
  const auto dtype =
      dtypeArg(a.keyword("dtype"), "torch.arange").value_or(anyFloat ? at::kFloat : at::kLong);
  const double length = std::ceil((s[1].toDouble() - s[0].toDouble()) / s[2].toDouble());
  if (length > 0) requestTensor(a, {int64_t(std::min(length, 1e18))}, dtype);
  return tensor(at::arange(s[0], s[1], s[2],
                           at::TensorOptions().device(deviceOf(a, "torch.arange")).dtype(dtype)));
}

// einsum(equation, *operands), or einsum(equation, [operands]).
Value einsum(Args& a) {
  const Value equation = arg(a, 0, "equation", "torch.einsum");
  if (equation->type != Type::Str)
    throw RuntimeFailure("torch.einsum(): the equation must be a string such as 'ij,jk->ik'");
  std::vector<at::Tensor> ops;
  if (a.positional.size() == 2 &&
      (a.positional[1]->type == Type::List || a.positional[1]->type == Type::Tuple)) {
    ops = tensorList(a.positional[1], "torch.einsum");
  } else {
    for (size_t i = 1; i < a.positional.size(); ++i) ops.push_back(toTensor(a.positional[i]));
  }
  interpreterOf(a).requestMemory(einsumBytes(equation->str, ops));
  return tensor(at::einsum(equation->str, ops));
}

// Asks the budget for `count` temporaries of x and y broadcast together, which ATen makes inside
// an op whose result is smaller (cosine_similarity's product and squares, isclose's differences):
// each of (n, 1, d) and (1, n, d) is n * n * d elements of `dtype`.
void requestTemporaries(Args& a, const at::Tensor& x, const at::Tensor& y, int64_t count,
                        at::ScalarType dtype) {
  const int64_t each = broadcastBytes(x, y, dtype);
  interpreterOf(a).requestMemory(each > (int64_t(1) << 60) / count ? each : count * each);
}

Value cosineSimilarity(Args& a) {
  const at::Tensor x = toTensor(arg(a, 0, "x1", "torch.cosine_similarity")),
                   y = toTensor(arg(a, 1, "x2", "torch.cosine_similarity"));
  requestTemporaries(a, x, y, 3, at::result_type(x, y));  // the product and the two squares
  return tensor(at::cosine_similarity(x, y, dimArg(a, 2, 1),
                                      asNumber(optional(a, 3, "eps", floating(1e-8)), "eps")));
}

}  // namespace

Value torchNamespace() {
  std::map<std::string, Value> torch;
  for (const auto& [name, t] : dtypes()) torch[name] = dtypeValue(t);
  // What each takes is PyTorch's signature, cut to what is implemented: (positional, keywords,
  // required), the positional ones' names first.
  torch["device"] = strictBuiltin("torch.device", {2, {"type", "index"}, 1}, makeDevice);
  torch["zeros"] = strictBuiltin("torch.zeros", {kVarargs, {"size", "dtype", "device"}},
                                 [](Args& a) { return filled(a, "torch.zeros", 0.0); });
  torch["ones"] = strictBuiltin("torch.ones", {kVarargs, {"size", "dtype", "device"}},
                                [](Args& a) { return filled(a, "torch.ones", 1.0); });
  torch["zeros_like"] =
      strictBuiltin("torch.zeros_like", {1, {"input", "dtype", "device"}, 1},
                    [](Args& a) { return filledLike(a, "torch.zeros_like", 0.0); });
  torch["ones_like"] = strictBuiltin("torch.ones_like", {1, {"input", "dtype", "device"}, 1},
                                     [](Args& a) { return filledLike(a, "torch.ones_like", 1.0); });
  torch["tensor"] = strictBuiltin("torch.tensor", {1, {"data", "dtype", "device"}, 1}, [](Args& a) {
    const at::Tensor data = toTensor(arg(a, 0, "data", "torch.tensor"));
    interpreterOf(a).requestMemory(expandedCopyBytes(data));
    at::Tensor t = data.clone();
    if (const auto dtype = dtypeArg(a.keyword("dtype"), "torch.tensor")) t = t.to(*dtype);
    return tensor(t.to(deviceOf(a, "torch.tensor")));
  });
  torch["arange"] =
      strictBuiltin("torch.arange", {3, {"start", "end", "step", "dtype", "device"}}, arange);
  torch["cat"] = strictBuiltin("torch.cat", {2, {"tensors", "dim"}, 1}, [](Args& a) {
    const auto parts = tensorList(arg(a, 0, "tensors", "torch.cat"), "torch.cat");
    interpreterOf(a).requestMemory(concatenatedBytes(parts));
    return tensor(at::cat(parts, dimArg(a, 1, 0)));
  });
  torch["stack"] = strictBuiltin("torch.stack", {2, {"tensors", "dim"}, 1}, [](Args& a) {
    const auto parts = tensorList(arg(a, 0, "tensors", "torch.stack"), "torch.stack");
    interpreterOf(a).requestMemory(concatenatedBytes(parts));
    return tensor(at::stack(parts, dimArg(a, 1, 0)));
  });
  for (const char* method :
       {"matmul", "softmax",   "log_softmax",  "argmax",      "argmin",  "topk",     "sort",
        "norm",   "gather",    "index_select", "masked_fill", "sum",     "mean",     "std",
        "var",    "max",       "min",          "cumsum",      "exp",     "log",      "abs",
        "sqrt",   "sigmoid",   "tanh",         "relu",        "clamp",   "prod",     "amax",
        "amin",   "argsort",   "unbind",       "isnan",       "isinf",   "isfinite", "nonzero",
        "neg",    "square",    "sin",          "cos",         "add",     "sub",      "mul",
        "div",    "eq",        "ne",           "gt",          "ge",      "lt",       "le",
        "t",      "pow",       "round",        "clone",       "detach",  "reshape",  "permute",
        "flip",   "transpose", "unsqueeze",    "squeeze",     "flatten", "narrow",   "chunk",
        "any",    "all",       "numel"})
    torch[method] = fromMethod(std::string("torch.") + method, method);
  torch["split"] = strictBuiltin(
      "torch.split", {3, {"tensor", "split_size_or_sections", "dim"}, 2}, [](Args& a) {
        return splitTensor(toTensor(arg(a, 0, "tensor", "torch.split")),
                           arg(a, 1, "split_size_or_sections", "torch.split"), dimArg(a, 2, 0));
      });
  torch["allclose"] = strictBuiltin(
      "torch.allclose", {5, {"input", "other", "rtol", "atol", "equal_nan"}, 2}, [](Args& a) {
        const at::Tensor x = toTensor(arg(a, 0, "input", "torch.allclose")),
                         y = toTensor(arg(a, 1, "other", "torch.allclose"));
        // |x - y|, rtol * |y| and their sum, in floats for bools and ints (isclose casts them);
        // operands of two dtypes are torch's error, not asked for.
        if (x.scalar_type() == y.scalar_type()) {
          const bool floats =
              at::isFloatingType(x.scalar_type()) || at::isComplexType(x.scalar_type());
          requestTemporaries(a, x, y, 3, floats ? x.scalar_type() : at::kFloat);
        }
        return boolean(at::allclose(x, y, asNumber(optional(a, 2, "rtol", floating(1e-5)), "rtol"),
                                    asNumber(optional(a, 3, "atol", floating(1e-8)), "atol"),
                                    flag(a, 4, "equal_nan", false)));
      });
  torch["equal"] = strictBuiltin("torch.equal", {2, {"input", "other"}, 2}, [](Args& a) {
    return boolean(at::equal(toTensor(arg(a, 0, "input", "torch.equal")),
                             toTensor(arg(a, 1, "other", "torch.equal"))));
  });
  // where(condition, input, other), or where(condition): the indices where it holds, a tensor a
  // dimension (condition.nonzero(as_tuple=True)).
  torch["where"] =
      strictBuiltin("torch.where", {3, {"condition", "input", "other"}, 1}, [](Args& a) {
        const Value condition = arg(a, 0, "condition", "torch.where");
        if (condition->type != Type::Tensor)
          throw RuntimeFailure("where(): argument 'condition' (position 1) must be Tensor, not " +
                               std::string(typeName(condition->type)));
        const at::Tensor c = condition->tensor;
        if (!a.get(1, "input") && !a.get(2, "other"))
          return nonzeroIndices(interpreterOf(a), c, true);
        const at::Tensor x = toTensor(arg(a, 1, "input", "torch.where")),
                         y = toTensor(arg(a, 2, "other", "torch.where"), &x);
        interpreterOf(a).requestMemory(broadcastBytes(c, x, at::result_type(x, y), y));
        return tensor(at::where(c, x, y));
      });
  torch["einsum"] = strictBuiltin("torch.einsum", kVarargs, {}, einsum);
  torch["no_grad"] = strictBuiltin("torch.no_grad", 0, {}, [](Args&) { return none(); });
  const Takes cosine{4, {"x1", "x2", "dim", "eps"}, 2};
  torch["cosine_similarity"] = strictBuiltin("torch.cosine_similarity", cosine, cosineSimilarity);
  Value functional = makeNamespace(
      "torch.nn.functional",
      {{"cosine_similarity",
        strictBuiltin("torch.nn.functional.cosine_similarity", cosine, cosineSimilarity)},
       {"softmax", fromMethod("torch.nn.functional.softmax", "softmax")},
       {"log_softmax", fromMethod("torch.nn.functional.log_softmax", "log_softmax")}});
  torch["nn"] = makeNamespace("torch.nn", {{"functional", functional}});
  return makeNamespace("torch", std::move(torch));
}

}  // namespace shardscope::trace
