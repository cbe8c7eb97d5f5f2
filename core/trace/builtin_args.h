// How the trace language's builtins and tensor methods read their arguments: required and
// optional ones by position or keyword, shapes, dims, dtypes, and the values they hand back
// (a (values, indices) pair, nested lists from a tensor). Shared by builtins.cpp and
// tensor_methods.cpp.
#pragma once

#include <ATen/ATen.h>

#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "interpreter.h"

namespace shardscope::trace::builtin_args {

using Args = CallArgs;

// The interpreter running the call (Interpreter::call sets it): builtins that apply the script's
// own operators (divmod's // and %, the order of min, max and sorted).
Interpreter& interpreterOf(const Args& a);
// Refuses a keyword fn() does not take, as Python does ("fn() got an unexpected keyword argument
// 'k'"), where ignoring it would give a quietly different result (sorted(key=...)).
void onlyKeywords(const Args& a, const std::vector<const char*>& taken, const char* fn);
// Argument i (or keyword `name`) of fn(); an error naming both when it is missing.
Value arg(const Args& a, size_t i, const char* name, const char* fn);
// Argument i (or keyword `name`), `dflt` when it is missing.
Value optional(const Args& a, size_t i, const char* name, Value dflt);
// A shape from the arguments from `from` on: one tuple, list or Size, or the dimensions one by one.
std::vector<int64_t> shapeArgs(const Args& a, size_t from);
// The tensors of a list or tuple argument of fn().
std::vector<at::Tensor> tensorList(const Value& v, const char* fn);
// torch's dtype names ("float32", "half", ...) and what they mean.
const std::map<std::string, at::ScalarType>& dtypes();
// torch.float32 and its kin as a script value (the canonical name, as torch prints it).
Value dtypeValue(at::ScalarType t);
// The scalar type a torch.* dtype value names; nullopt for anything else.
std::optional<at::ScalarType> asDtype(const Value& v);
// The `dim` argument (position i or keyword), dflt when missing or None.
long long dimArg(const Args& a, size_t i, long long dflt);
// The `keepdim` argument (position i or keyword), false when missing.
bool keepdim(const Args& a, size_t i);
// A (values, indices) result as a tuple of two tensors.
Value valuesIndices(const std::tuple<at::Tensor, at::Tensor>& r);
// A tensor as nested lists of Python numbers (a number for a 0-d tensor).
Value fromTensorList(const at::Tensor& t);

}  // namespace shardscope::trace::builtin_args
