// Tensor properties and methods in trace scripts (`x.shape`, `x.sum(-1)`, `x.zero_()`): the
// documented list (docs/trace-language.md); any other name is an error that lists them, and so is
// an argument a method does not take (x.sum(dims=1) does not quietly sum everything).
#include <ATen/ATen.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "../error.h"
#include "builtin_args.h"
#include "interpreter.h"
#include "result_sizes.h"
#include "tensor_methods.h"
#include "tensor_reductions.h"

namespace shardscope::trace {

using namespace builtin_args;

namespace {

// An in-place method's write, noted on the interpreter that called it (Interpreter::call sets it).
void wrote(Args& a) {
  SS_ASSERT(a.interpreter, "an in-place tensor method was called without its interpreter");
  a.interpreter->noteTensorWrite();
}

// x as `dtype`, or on `device`; x itself when it is there already, as torch gives it. A copy is
// asked of the budget first: a cast to a wider dtype grows, and so does a copy of an expanded
// view (each of its elements).
at::Tensor castTo(const at::Tensor& x, Args& a, at::ScalarType dtype) {
  if (x.scalar_type() != dtype) requestTensor(a, x.sizes(), dtype);
  return x.to(dtype);
}

at::Tensor movedTo(const at::Tensor& x, Args& a, const at::Device& device) {
  if (x.device() != device) interpreterOf(a).requestMemory(expandedCopyBytes(x));
  return x.to(device);
}

// to(dtype) / to('cpu') / to('cpu', dtype=...), also as keywords dtype= and device=. The first
// positional is a dtype or a device, as in torch; Takes names it `device` so that
// x.to('cpu', dtype=torch.float16) is not two values for one argument. The device is 'cpu' or
// the rank's own (deviceArg).
Value to(const at::Tensor& x, Args& a) {
  at::Tensor y = x;
  if (const Value* d = a.get(0, "device"); d && (*d)->type != Type::None) {
    if (auto dt = asDtype(*d))
      y = castTo(y, a, *dt);
    else if ((*d)->type == Type::Str || (*d)->type == Type::Device)
      y = movedTo(y, a, *deviceArg(d, "Tensor.to"));
    else
      throw RuntimeFailure(
          "Tensor.to() expects a dtype such as torch.float32 or a device such "
          "as 'cpu' or x.device, got " +
          repr(*d));
  }
  if (const Value* d = a.keyword("dtype"); d && (*d)->type != Type::None) {
    const auto dt = asDtype(*d);
    if (!dt)
      throw RuntimeFailure("Tensor.to() expects dtype= to be a torch dtype, got " + repr(*d));
    y = castTo(y, a, *dt);
  }
  return tensor(y);
}

// An in-place method: notes the write, then runs `op` on the tensor.
template <typename Op>
Value inPlace(const at::Tensor& x, Args& a, Op op) {
  wrote(a);
  at::Tensor y = x;
  op(y);
  return tensor(y);
}

// clamp(min=None, max=None) and clamp_: numbers, at least one, as torch asks.
std::pair<c10::optional<at::Scalar>, c10::optional<at::Scalar>> clampBounds(Args& a,
                                                                            const char* fn) {
  const auto bound = [&](size_t at, const char* name) -> c10::optional<at::Scalar> {
    const Value* v = a.get(at, name);
    if (!v || (*v)->type == Type::None) return c10::nullopt;
    const bool real = (*v)->type == Type::Float ||
                      ((*v)->type == Type::Tensor && (*v)->tensor.is_floating_point());
    if (real) return at::Scalar(asNumber(*v, name));
    return at::Scalar(int64_t(asInt(*v, name)));  // an int bound keeps an int tensor int
  };
  auto lo = bound(0, "min");
  auto hi = bound(1, "max");
  if (!lo && !hi)
    throw RuntimeFailure(std::string(fn) + "(): at least one of 'min' or 'max' must not be None");
  return {lo, hi};
}

// A Python number as torch takes it: an int stays an int (torch refuses a float alpha for an int
// tensor, and an int tensor to an int power stays an int tensor).
at::Scalar numberScalar(const Value& v, const char* what) {
  return v->type == Type::Float ? at::Scalar(asNumber(v, what))
                                : at::Scalar(int64_t(asInt(v, what)));
}

// add(other, alpha=1) / sub and their in-place forms.
at::Scalar alphaOf(Args& a) {
  const Value* alpha = a.keyword("alpha");
  return alpha ? numberScalar(*alpha, "alpha") : at::Scalar(int64_t(1));
}

// The kind of result an elementwise method gives: the operands' promoted dtype, a float for a
// true division of integers, or a bool for a comparison.
enum class ResultKind { Promoted, Divided, Compared };

// nonzero(as_tuple=False): the indices of the nonzero elements, a row each, or (as_tuple) a
// tensor of them a dimension, as torch.where(condition) gives them.
Value nonzero(const at::Tensor& x, Args& a) {
  return nonzeroIndices(interpreterOf(a), x, flag(a, 0, "as_tuple", false));
}

// topk(k, dim=-1, largest=True, sorted=True): (values, indices), asked of the budget first: k of
// each row's values and their int64 indices (5 times a bf16 row's bytes at k = its length). A k
// or dim torch refuses asks for nothing: torch then says why.
Value topk(const at::Tensor& x, Args& a) {
  const int64_t k = asInt(arg(a, 0, "k", "Tensor.topk"), "k");
  const int64_t dim = dimArg(a, 1, -1), rank = std::max<int64_t>(x.dim(), 1);
  if (dim >= -rank && dim < rank && x.dim() > 0 && k >= 0 && k <= x.size(dim)) {
    std::vector<int64_t> sizes = x.sizes().vec();
    sizes[size_t(dim < 0 ? dim + rank : dim)] = k;
    interpreterOf(a).requestMemory(tensorBytes(sizes, x.scalar_type()) +
                                   tensorBytes(sizes, at::kLong));
  }
  return valuesIndices("topk",
                       x.topk(k, dim, flag(a, 2, "largest", true), flag(a, 3, "sorted", true)));
}

// An elementwise method's `other`: a tensor or a number, as torch's methods take it (a list or a
// tuple is torch's TypeError, where the operators' `x + [1, 2]` is also refused).
at::Tensor otherOperand(const Args& a, const at::Tensor& x, const char* shown) {
  const Value other = arg(a, 0, "other", shown);
  if (other->type != Type::Tensor && other->type != Type::Deferred && !isNumber(other)) {
    const std::string name = std::string(shown).substr(std::string(shown).rfind('.') + 1);
    throw RuntimeFailure(name + "(): argument 'other' (position 1) must be Tensor, not " +
                         typeName(other->type));
  }
  return operandTensor(other, x);
}

// `other` as a tensor beside x, once the budget has room for x and it broadcast together.
at::Tensor broadcastOperand(const at::Tensor& x, Args& a, const char* shown, ResultKind kind) {
  const at::Tensor y = otherOperand(a, x, shown);
  at::ScalarType dtype = kind == ResultKind::Compared ? at::kBool : at::result_type(x, y);
  if (kind == ResultKind::Divided && !at::isFloatingType(dtype) && !at::isComplexType(dtype))
    dtype = at::kFloat;
  interpreterOf(a).requestMemory(broadcastBytes(x, y, dtype));
  return y;
}

// An elementwise method of one operand (eq, mul, div, ...): `other` a tensor or a number.
template <typename Op>
TensorMethod elementwise(const char* shown, Op op, ResultKind kind = ResultKind::Promoted) {
  return TensorMethod{builtin_args::Takes{1, {"other"}, 1},
                      [shown, op, kind](const at::Tensor& x, Args& a) {
                        return tensor(op(x, broadcastOperand(x, a, shown, kind)));
                      }};
}

// What a method that copies each of x's elements makes of them: values like x's, bools (isnan),
// int64 indices (argsort), or both (sort).
enum class CopyOf { Values, Bools, Indices, ValuesAndIndices };

// A method whose result holds a copy of each of x's elements (clone, exp, sort): the copy is
// asked of the budget before it is made, whether x holds its elements or is an expanded view of
// fewer (x.expand(10**5, 10**5)); values in the dtype= the method takes, when given
// (softmax(x, 0, dtype=torch.float64)).
TensorMethod copying(TensorMethod m, CopyOf made = CopyOf::Values) {
  const auto& names = m.takes.keywords;
  const auto dtypeAt = std::find_if(names.begin(), names.end(),
                                    [](const char* k) { return std::string(k) == "dtype"; });
  const size_t dtypePosition = dtypeAt == names.end() ? SIZE_MAX : size_t(dtypeAt - names.begin());
  m.call = [call = std::move(m.call), made, dtypePosition](const at::Tensor& x, Args& a) {
    at::ScalarType valuesType = x.scalar_type();
    if (const Value* d = dtypePosition == SIZE_MAX ? nullptr : a.get(dtypePosition, "dtype")) {
      if (const auto t = asDtype(*d)) valuesType = *t;  // anything else: the method says why
    }
    const bool values = made == CopyOf::Values || made == CopyOf::ValuesAndIndices;
    const bool indices = made == CopyOf::Indices || made == CopyOf::ValuesAndIndices;
    int64_t bytes = made == CopyOf::Bools ? tensorBytes(x.sizes(), at::kBool) : 0;
    if (values) bytes += tensorBytes(x.sizes(), valuesType);
    if (indices) bytes += tensorBytes(x.sizes(), at::kLong);
    interpreterOf(a).requestMemory(bytes);
    return call(x, a);
  };
  return m;
}

using M = TensorMethod;
using T = builtin_args::Takes;

// Each method with what it takes after the tensor: PyTorch's names and order for the arguments
// implemented here; anything else is refused (checkArguments), never ignored.
const std::map<std::string, TensorMethod>& methods() {
  static const std::map<std::string, TensorMethod> table = {
      {"size", M{T{1, {"dim"}}, [](const at::Tensor& x, Args& a) {
         const auto dim = optionalDim(a, 0);
         return dim ? integer(x.size(*dim)) : sizeOf(x);
       }}},
      {"dim", M{T{}, [](const at::Tensor& x, Args&) { return integer(x.dim()); }}},
      {"numel", M{T{}, [](const at::Tensor& x, Args&) { return integer(x.numel()); }}},
      {"clone", copying(M{T{}, [](const at::Tensor& x, Args&) { return tensor(x.clone()); }})},
      {"detach", M{T{}, [](const at::Tensor& x, Args&) { return tensor(x.detach()); }}},
      {"cpu", M{T{}, [](const at::Tensor& x, Args& a) { return tensor(movedTo(x, a, at::kCPU)); }}},
      {"contiguous", M{T{}, [](const at::Tensor& x, Args& a) {  // x itself when it already is
         if (!x.is_contiguous()) interpreterOf(a).requestMemory(tensorBytes(x.sizes(), x.scalar_type()));
         return tensor(x.contiguous());
       }}},
      {"float", M{T{}, [](const at::Tensor& x, Args& a) { return tensor(castTo(x, a, at::kFloat)); }}},
      {"half", M{T{}, [](const at::Tensor& x, Args& a) { return tensor(castTo(x, a, at::kHalf)); }}},
      {"bfloat16", M{T{}, [](const at::Tensor& x, Args& a) { return tensor(castTo(x, a, at::kBFloat16)); }}},
      {"double", M{T{}, [](const at::Tensor& x, Args& a) { return tensor(castTo(x, a, at::kDouble)); }}},
      {"long", M{T{}, [](const at::Tensor& x, Args& a) { return tensor(castTo(x, a, at::kLong)); }}},
      {"int", M{T{}, [](const at::Tensor& x, Args& a) { return tensor(castTo(x, a, at::kInt)); }}},
      {"bool", M{T{}, [](const at::Tensor& x, Args& a) { return tensor(castTo(x, a, at::kBool)); }}},
      {"to", M{T{1, {"device", "dtype"}}, to}},
      {"view", M{T{kVarargs, {"size"}}, [](const at::Tensor& x, Args& a) {
         return tensor(x.view(shapeArg(a, "size", "Tensor.view")));
       }}},
      {"reshape", M{T{kVarargs, {"shape"}}, [](const at::Tensor& x, Args& a) {
         const std::vector<int64_t> shape = shapeArg(a, "shape", "Tensor.reshape");
         interpreterOf(a).requestMemory(reshapedBytes(x, shape));  // 0 for a view
         return tensor(x.reshape(shape));
       }}},
      {"permute", M{T{kVarargs, {"dims"}}, [](const at::Tensor& x, Args& a) {
         return tensor(x.permute(shapeArg(a, "dims", "Tensor.permute")));
       }}},
      {"flip", copying(M{T{kVarargs, {"dims"}}, [](const at::Tensor& x, Args& a) {
         return tensor(x.flip(shapeArg(a, "dims", "Tensor.flip")));
       }})},
      {"transpose", M{T{2, {"dim0", "dim1"}, 2}, [](const at::Tensor& x, Args& a) {
         return tensor(x.transpose(asInt(arg(a, 0, "dim0", "Tensor.transpose"), "dim0"),
                                   asInt(arg(a, 1, "dim1", "Tensor.transpose"), "dim1")));
       }}},
      {"unsqueeze", M{T{1, {"dim"}, 1}, [](const at::Tensor& x, Args& a) {
         return tensor(x.unsqueeze(asInt(arg(a, 0, "dim", "Tensor.unsqueeze"), "dim")));
       }}},
      {"squeeze", M{T{1, {"dim"}}, [](const at::Tensor& x, Args& a) {
         const auto dim = optionalDim(a, 0);
         return tensor(dim ? x.squeeze(*dim) : x.squeeze());
       }}},
      {"flatten", M{T{2, {"start_dim", "end_dim"}}, [](const at::Tensor& x, Args& a) {
         const int64_t start = dimArg(a, 0, 0, "start_dim"), end = dimArg(a, 1, -1, "end_dim");
         interpreterOf(a).requestMemory(flattenedBytes(x, start, end));  // 0 for a view
         return tensor(x.flatten(start, end));
       }}},
      {"narrow", M{T{3, {"dim", "start", "length"}, 3}, [](const at::Tensor& x, Args& a) {
         return tensor(x.narrow(asInt(arg(a, 0, "dim", "Tensor.narrow"), "dim"),
                                asInt(arg(a, 1, "start", "Tensor.narrow"), "start"),
                                asInt(arg(a, 2, "length", "Tensor.narrow"), "length")));
       }}},
      {"sum", M{T{2, {"dim", "keepdim", "dtype"}}, [](const at::Tensor& x, Args& a) {
         return sumOrMean(x, a, false);
       }}},
      {"mean", M{T{2, {"dim", "keepdim", "dtype"}}, [](const at::Tensor& x, Args& a) {
         return sumOrMean(x, a, true);
       }}},
      {"std", M{T{3, {"dim", "unbiased", "keepdim", "correction"}}, [](const at::Tensor& x, Args& a) {
         return stdOrVar(x, a, false);
       }}},
      {"var", M{T{3, {"dim", "unbiased", "keepdim", "correction"}}, [](const at::Tensor& x, Args& a) {
         return stdOrVar(x, a, true);
       }}},
      {"max", M{T{2, {"dim", "keepdim", "other"}}, [](const at::Tensor& x, Args& a) {
         return extreme(x, a, true);
       }}},
      {"min", M{T{2, {"dim", "keepdim", "other"}}, [](const at::Tensor& x, Args& a) {
         return extreme(x, a, false);
       }}},
      {"argmax", M{T{2, {"dim", "keepdim"}}, [](const at::Tensor& x, Args& a) {
         return extremeIndex(x, a, true);
       }}},
      {"argmin", M{T{2, {"dim", "keepdim"}}, [](const at::Tensor& x, Args& a) {
         return extremeIndex(x, a, false);
       }}},
      {"norm", M{T{3, {"p", "dim", "keepdim"}}, normOf}},
      // softmax, log_softmax and cumsum need their dim, as in torch (no default to differ from).
      {"softmax", copying(M{T{2, {"dim", "dtype"}, 1}, [](const at::Tensor& x, Args& a) {
         return tensor(
             at::softmax(x, dimArg(a, 0, -1), dtypeArg(a.get(1, "dtype"), "Tensor.softmax")));
       }})},
      {"log_softmax", copying(M{T{2, {"dim", "dtype"}, 1}, [](const at::Tensor& x, Args& a) {
         return tensor(at::log_softmax(x, dimArg(a, 0, -1),
                                       dtypeArg(a.get(1, "dtype"), "Tensor.log_softmax")));
       }})},
      {"topk", M{T{4, {"k", "dim", "largest", "sorted"}, 1}, topk}},
      {"sort", copying(M{T{2, {"dim", "descending", "stable"}}, [](const at::Tensor& x, Args& a) {
         const int64_t dim = dimArg(a, 0, -1);
         const bool descending = flag(a, 1, "descending", false);
         if (const Value* stable = a.keyword("stable"))
           return valuesIndices("sort", x.sort(truthy(*stable), dim, descending));
         return valuesIndices("sort", x.sort(dim, descending));
       }}, CopyOf::ValuesAndIndices)},
      {"cumsum", copying(M{T{1, {"dim", "dtype"}, 1}, [](const at::Tensor& x, Args& a) {
         return tensor(x.cumsum(dimArg(a, 0, 0), dtypeArg(a.keyword("dtype"), "Tensor.cumsum")));
       }})},
      {"abs", copying(M{T{}, [](const at::Tensor& x, Args&) { return tensor(x.abs()); }})},
      {"round", copying(M{T{0, {"decimals"}}, [](const at::Tensor& x, Args& a) {
         const Value* decimals = a.keyword("decimals");  // keyword-only, as in torch
         return tensor(decimals ? x.round(asInt(*decimals, "decimals")) : x.round());
       }})},
      {"exp", copying(M{T{}, [](const at::Tensor& x, Args&) { return tensor(x.exp()); }})},
      {"log", copying(M{T{}, [](const at::Tensor& x, Args&) { return tensor(x.log()); }})},
      {"sqrt", copying(M{T{}, [](const at::Tensor& x, Args&) { return tensor(x.sqrt()); }})},
      {"sigmoid", copying(M{T{}, [](const at::Tensor& x, Args&) { return tensor(x.sigmoid()); }})},
      {"tanh", copying(M{T{}, [](const at::Tensor& x, Args&) { return tensor(x.tanh()); }})},
      {"relu", copying(M{T{}, [](const at::Tensor& x, Args&) { return tensor(x.relu()); }})},
      {"pow", copying(M{T{1, {"exponent"}, 1}, [](const at::Tensor& x, Args& a) {
         const Value& exponent = arg(a, 0, "exponent", "Tensor.pow");
         if (exponent->type != Type::Tensor) return tensor(x.pow(numberScalar(exponent, "exponent")));
         interpreterOf(a).requestMemory(
             broadcastBytes(x, exponent->tensor, at::result_type(x, exponent->tensor)));
         return tensor(x.pow(exponent->tensor));
       }})},
      {"matmul", M{T{1, {"other"}, 1}, [](const at::Tensor& x, Args& a) {
         const at::Tensor y = toTensor(arg(a, 0, "other", "Tensor.matmul"));
         interpreterOf(a).requestMemory(matmulBytes(x, y));
         return tensor(at::matmul(x, y));
       }}},
      {"any", M{T{2, {"dim", "keepdim"}}, [](const at::Tensor& x, Args& a) {
         return anyOrAll(x, a, true);
       }}},
      {"all", M{T{2, {"dim", "keepdim"}}, [](const at::Tensor& x, Args& a) {
         return anyOrAll(x, a, false);
       }}},
      {"item", M{T{}, [](const at::Tensor& x, Args&) {
         if (x.numel() != 1)
           throw RuntimeFailure("item() needs a tensor with one element, this one has " +
                                std::to_string(x.numel()));
         return fromTensorList(x.reshape({}));
       }}},
      {"tolist", M{T{}, [](const at::Tensor& x, Args& a) {
         interpreterOf(a).requestMemory(newValuesBytes(x.numel()));
         return fromTensorList(x.to(at::kCPU));
       }}},
      {"gather", M{T{2, {"dim", "index"}, 2}, [](const at::Tensor& x, Args& a) {
         // The result has the index's shape (an expanded index's every element), and the index
         // its int64 copy; asked where ATen takes the sizes (else torch's own error).
         const int64_t dim = asInt(arg(a, 0, "dim", "Tensor.gather"), "dim");
         const at::Tensor index = toTensor(arg(a, 1, "index", "Tensor.gather"));
         const auto sizesTaken = [&] {
           return runOnMeta([&] {
                    return std::vector{metaLike(x).gather(dim, metaLike(index).to(at::kLong))};
                  }).outcome != MetaRun::Outcome::Refused;
         };
         if (tensorBytes(index.sizes(), at::kLong) > kSmallOperandBytes && sizesTaken()) {
           int64_t bytes = tensorBytes(index.sizes(), x.scalar_type());
           if (index.scalar_type() != at::kLong) bytes += tensorBytes(index.sizes(), at::kLong);
           interpreterOf(a).requestMemory(bytes);
         }
         return tensor(x.gather(dim, index.to(at::kLong)));
       }}},
      {"index_select", M{T{2, {"dim", "index"}, 2}, [](const at::Tensor& x, Args& a) {
         const int64_t dim = asInt(arg(a, 0, "dim", "Tensor.index_select"), "dim");
         const at::Tensor index = toTensor(arg(a, 1, "index", "Tensor.index_select"));
         if (dim >= -x.dim() && dim < x.dim()) {  // else torch's own error
           std::vector<int64_t> sizes = x.sizes().vec();
           sizes[size_t(dim < 0 ? dim + x.dim() : dim)] = index.numel();
           requestTensor(a, sizes, x.scalar_type());
         }
         return tensor(x.index_select(dim, index));
       }}},
      {"chunk", M{T{2, {"chunks", "dim"}, 1}, [](const at::Tensor& x, Args& a) {
         std::vector<Value> parts;
         for (const auto& c :
              x.chunk(asInt(arg(a, 0, "chunks", "Tensor.chunk"), "chunks"), dimArg(a, 1, 0)))
           parts.push_back(tensor(c));
         return tuple(parts);
       }}},
      {"zero_", M{T{}, [](const at::Tensor& x, Args& a) {
         return inPlace(x, a, [](at::Tensor& y) { y.zero_(); });
       }}},
      {"fill_", M{T{1, {"value"}, 1}, [](const at::Tensor& x, Args& a) {
         const double v = asNumber(arg(a, 0, "value", "Tensor.fill_"), "value");
         return inPlace(x, a, [v](at::Tensor& y) { y.fill_(v); });
       }}},
      {"copy_", M{T{1, {"src"}, 1}, [](const at::Tensor& x, Args& a) {
         const at::Tensor src = toTensor(arg(a, 0, "src", "Tensor.copy_"));
         return inPlace(x, a, [&src](at::Tensor& y) { y.copy_(src); });
       }}},
      {"mul_", M{T{1, {"other"}, 1}, [](const at::Tensor& x, Args& a) {
         const at::Tensor other = otherOperand(a, x, "Tensor.mul_");
         return inPlace(x, a, [&other](at::Tensor& y) { y.mul_(other); });
       }}},
      {"add_", M{T{1, {"other", "alpha"}, 1}, [](const at::Tensor& x, Args& a) {
         const at::Tensor other = otherOperand(a, x, "Tensor.add_");
         const at::Scalar scale = alphaOf(a);
         return inPlace(x, a, [&](at::Tensor& y) { y.add_(other, scale); });
       }}},
      {"sub_", M{T{1, {"other", "alpha"}, 1}, [](const at::Tensor& x, Args& a) {
         const at::Tensor other = otherOperand(a, x, "Tensor.sub_");
         const at::Scalar scale = alphaOf(a);
         return inPlace(x, a, [&](at::Tensor& y) { y.sub_(other, scale); });
       }}},
      {"div_", M{T{1, {"other"}, 1}, [](const at::Tensor& x, Args& a) {
         const at::Tensor other = otherOperand(a, x, "Tensor.div_");
         return inPlace(x, a, [&other](at::Tensor& y) { y.div_(other); });
       }}},
      {"clamp_", M{T{2, {"min", "max"}}, [](const at::Tensor& x, Args& a) {
         const auto [lo, hi] = clampBounds(a, "Tensor.clamp_");
         return inPlace(x, a, [&, lo = lo, hi = hi](at::Tensor& y) { y.clamp_(lo, hi); });
       }}},
      {"clamp", copying(M{T{2, {"min", "max"}}, [](const at::Tensor& x, Args& a) {
         const auto [lo, hi] = clampBounds(a, "Tensor.clamp");
         return tensor(x.clamp(lo, hi));
       }})},
      {"add", M{T{1, {"other", "alpha"}, 1}, [](const at::Tensor& x, Args& a) {
         const at::Tensor y = broadcastOperand(x, a, "Tensor.add", ResultKind::Promoted);
         return tensor(x.add(y, alphaOf(a)));
       }}},
      {"sub", M{T{1, {"other", "alpha"}, 1}, [](const at::Tensor& x, Args& a) {
         const at::Tensor y = broadcastOperand(x, a, "Tensor.sub", ResultKind::Promoted);
         return tensor(x.sub(y, alphaOf(a)));
       }}},
      {"mul", elementwise("Tensor.mul", [](const at::Tensor& x, const at::Tensor& y) {
         return x.mul(y);
       })},
      {"div", elementwise("Tensor.div", [](const at::Tensor& x, const at::Tensor& y) {
         return x.div(y);
       }, ResultKind::Divided)},
      {"eq", elementwise("Tensor.eq", [](const at::Tensor& x, const at::Tensor& y) { return x.eq(y); }, ResultKind::Compared)},
      {"ne", elementwise("Tensor.ne", [](const at::Tensor& x, const at::Tensor& y) { return x.ne(y); }, ResultKind::Compared)},
      {"gt", elementwise("Tensor.gt", [](const at::Tensor& x, const at::Tensor& y) { return x.gt(y); }, ResultKind::Compared)},
      {"ge", elementwise("Tensor.ge", [](const at::Tensor& x, const at::Tensor& y) { return x.ge(y); }, ResultKind::Compared)},
      {"lt", elementwise("Tensor.lt", [](const at::Tensor& x, const at::Tensor& y) { return x.lt(y); }, ResultKind::Compared)},
      {"le", elementwise("Tensor.le", [](const at::Tensor& x, const at::Tensor& y) { return x.le(y); }, ResultKind::Compared)},
      {"neg", copying(M{T{}, [](const at::Tensor& x, Args&) { return tensor(x.neg()); }})},
      {"square", copying(M{T{}, [](const at::Tensor& x, Args&) { return tensor(x.square()); }})},
      {"sin", copying(M{T{}, [](const at::Tensor& x, Args&) { return tensor(x.sin()); }})},
      {"cos", copying(M{T{}, [](const at::Tensor& x, Args&) { return tensor(x.cos()); }})},
      {"isnan", copying(M{T{}, [](const at::Tensor& x, Args&) { return tensor(x.isnan()); }}, CopyOf::Bools)},
      {"isinf", copying(M{T{}, [](const at::Tensor& x, Args&) { return tensor(x.isinf()); }}, CopyOf::Bools)},
      {"isfinite", copying(M{T{}, [](const at::Tensor& x, Args&) { return tensor(x.isfinite()); }}, CopyOf::Bools)},
      {"nonzero", M{T{0, {"as_tuple"}}, nonzero}},
      {"t", M{T{}, [](const at::Tensor& x, Args&) { return tensor(x.t()); }}},
      {"prod", M{T{2, {"dim", "keepdim", "dtype"}}, prodOf}},
      {"amax", M{T{2, {"dim", "keepdim"}}, [](const at::Tensor& x, Args& a) {
         return extremeValues(x, a, true);
       }}},
      {"amin", M{T{2, {"dim", "keepdim"}}, [](const at::Tensor& x, Args& a) {
         return extremeValues(x, a, false);
       }}},
      {"argsort", copying(M{T{2, {"dim", "descending"}}, [](const at::Tensor& x, Args& a) {
         return tensor(x.argsort(dimArg(a, 0, -1), flag(a, 1, "descending", false)));
       }}, CopyOf::Indices)},
      // Tensor.split names its first argument split_size; torch.split, split_size_or_sections.
      {"split", M{T{2, {"split_size", "dim"}, 1}, [](const at::Tensor& x, Args& a) {
         return splitTensor(x, arg(a, 0, "split_size", "Tensor.split"), dimArg(a, 1, 0));
       }}},
      {"unbind", M{T{1, {"dim"}}, [](const at::Tensor& x, Args& a) {
         std::vector<Value> parts;
         for (const auto& p : x.unbind(dimArg(a, 0, 0))) parts.push_back(tensor(p));
         return tuple(parts);
       }}},
      {"expand", M{T{kVarargs}, [](const at::Tensor& x, Args& a) {
         return tensor(x.expand(shapeArgs(a, 0)));
       }}},
      {"repeat", M{T{kVarargs}, [](const at::Tensor& x, Args& a) {
         const std::vector<int64_t> times = shapeArgs(a, 0);
         if (times.size() < size_t(x.dim())) return tensor(x.repeat(times));  // torch's error
         std::vector<int64_t> factors = {x.numel()};  // the result's elements: x's, times each
         factors.insert(factors.end(), times.begin(), times.end());
         requestTensor(a, factors, x.scalar_type());
         return tensor(x.repeat(times));
       }}},
      {"masked_fill", M{T{2, {"mask", "value"}, 2}, [](const at::Tensor& x, Args& a) {
         const at::Tensor mask = toTensor(arg(a, 0, "mask", "Tensor.masked_fill"));
         interpreterOf(a).requestMemory(broadcastBytes(x, mask, x.scalar_type()));
         return tensor(
             x.masked_fill(mask, asNumber(arg(a, 1, "value", "Tensor.masked_fill"), "value")));
       }}},
  };
  return table;
}

}  // namespace

Value nonzeroIndices(Interpreter& in, const at::Tensor& x, bool asTuple) {
  // How many there are decides the result's size: counted first (nonzero waits for the device
  // anyway), so that the budget refuses an index list past it before it is made.
  const int64_t count = trueCount(x);
  in.requestMemory(tensorBytes({count, std::max<int64_t>(x.dim(), 1)}, at::kLong));
  if (!asTuple) return tensor(x.nonzero());
  std::vector<Value> items;
  for (const at::Tensor& i : at::nonzero_numpy(x)) items.push_back(tensor(i));
  return tuple(std::move(items));
}

Value splitTensor(const at::Tensor& x, const Value& sizes, int64_t dim) {
  std::vector<at::Tensor> parts;
  if (sizes->type == Type::List || sizes->type == Type::Tuple) {
    std::vector<int64_t> each;
    for (const Value& s : sizes->items) each.push_back(asInt(s, "split sizes"));
    parts = x.split_with_sizes(each, dim);
  } else {
    parts = x.split(asInt(sizes, "split_size"), dim);
  }
  std::vector<Value> out;
  for (const auto& p : parts) out.push_back(tensor(p));
  return tuple(out);
}

const TensorMethod* tensorMethod(const std::string& name) {
  const auto it = methods().find(name);
  return it == methods().end() ? nullptr : &it->second;
}

std::string tensorAttributeNames() {
  std::string known = "shape, dtype, device, ndim, T";
  for (const auto& [k, m] : methods()) known += ", " + k;
  return known;
}

Value tensorAttribute(Interpreter& in, const Value& self, const std::string& name) {
  const at::Tensor& t = self->tensor;
  if (name == "shape") return sizeOf(t);
  if (name == "dtype") return dtypeValue(t.scalar_type());
  if (name == "device") return deviceValue(t.device());
  if (name == "ndim") return integer(t.dim());
  if (name == "T") return tensor(t.t());
  const TensorMethod* m = tensorMethod(name);
  if (!m)
    in.fail("tensors have no attribute '" + name +
            "' in trace scripts; supported: " + tensorAttributeNames());
  return builtin(name, [m, t, shown = "Tensor." + name](Args& a) {
    checkArguments(a, m->takes, shown);
    return m->call(t, a);
  });
}

}  // namespace shardscope::trace
