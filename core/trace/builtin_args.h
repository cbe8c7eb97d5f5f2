// How the trace language's builtins, torch functions and tensor methods read their arguments:
// what each takes (Takes: refused otherwise, never ignored), required and optional ones by
// position or keyword, shapes, dims, dtypes, and the values they hand back (a (values, indices)
// pair, nested lists from a tensor). Shared by builtins.cpp, torch_functions.cpp and
// tensor_methods.cpp.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
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
// What a builtin, torch function or tensor method takes, as its Python signature says: at most
// `positional` positional arguments (kVarargs: any number, a shape), the keywords `keywords`, and
// the first `required` of them present. The first `positional` keywords name the positional
// parameters in order (torch.topk: input, k, dim, largest, sorted), so `keywords[i]` given both
// by position and by keyword is refused too, as is a missing required one.
inline constexpr size_t kVarargs = SIZE_MAX;
// How a builtin words a wrong count of arguments, as CPython's own do: by name ("takes at most 2
// positional arguments", "is missing its 'x'"), as METH_O functions ("len() takes exactly one
// argument (2 given)"), or as Argument Clinic's positional checks ("sorted expected 1 argument,
// got 0"; "range expected at least 1 argument, got 0").
enum class Arity { Named, ExactlyOne, Expected };
struct Takes {
  size_t positional = 0;
  std::vector<const char*> keywords = {};
  size_t required = 0;
  // The first `positionalOnly` keywords only name positional parameters, as Python's builtins
  // have them (len(obj=x) is refused: "len() takes no keyword arguments").
  size_t positionalOnly = 0;
  Arity arity = Arity::Named;
};
// Refuses a call of fn() (its name as the script wrote it: "sorted", "torch.topk", "Tensor.sum")
// that passes what it does not take, as Python does ("fn() got an unexpected keyword argument
// 'k'; it takes ..."), where ignoring it would give a quietly different result
// (x.sum(dims=1) summing everything).
void checkArguments(const Args& a, const Takes& takes, const std::string& fn);
// A builtin named `name` that checks its arguments against `takes` before running `fn`.
Value strictBuiltin(std::string name, Takes takes, BuiltinFn fn);
Value strictBuiltin(std::string name, size_t positional, std::vector<const char*> keywords,
                    BuiltinFn fn);
// Argument i (or keyword `name`) of fn(); an error naming both when it is missing.
Value arg(const Args& a, size_t i, const char* name, const std::string& fn);
// Argument i (or keyword `name`), `dflt` when it is missing.
Value optional(const Args& a, size_t i, const char* name, Value dflt);
// Asks the caller's memory budget for a tensor of `dtype` whose element count is the product of
// `sizes`, before it is made (torch.zeros(10**10) would otherwise allocate first); a count that
// overflows is refused too.
void requestTensor(const Args& a, c10::ArrayRef<int64_t> sizes, at::ScalarType dtype);
// A shape from the arguments from `from` on: one tuple, list or Size, or the dimensions one by one.
std::vector<int64_t> shapeArgs(const Args& a, size_t from);
// A shape given one by one, as a tuple, list or Size, or by the keyword `keyword` (zeros(size=),
// x.view(size=), x.reshape(shape=), x.permute(dims=), x.flip(dims=)), as torch takes it.
std::vector<int64_t> shapeArg(const Args& a, const char* keyword, const std::string& fn);
// The tensors of a list or tuple argument of fn().
std::vector<at::Tensor> tensorList(const Value& v, const char* fn);
// torch's dtype names ("float32", "half", ...) and what they mean.
const std::map<std::string, at::ScalarType>& dtypes();
// torch.float32 and its kin as a script value (the canonical name, as torch prints it).
Value dtypeValue(at::ScalarType t);
// The scalar type a torch.* dtype value names; nullopt for anything else.
std::optional<at::ScalarType> asDtype(const Value& v);
// The dtype argument `v` of fn() (a keyword or a position); nullopt when missing or None, an error
// naming fn for anything but a torch dtype. (c10::optional, what ATen's functions take.)
c10::optional<at::ScalarType> dtypeArg(const Value* v, const std::string& fn);
// 'cpu', 'cpu:N', 'cuda' or 'cuda:N' (N in 0..127, c10's device index) as a device; nullopt for
// any other name (the devices trace tensors may live on).
c10::optional<c10::Device> deviceNamed(const std::string& name);
// The device argument `v` of fn() (a torch.device or its name): nullopt when missing or None. A
// trace's tensors live on its rank's device, so the CPU and, on a GPU rank, 'cuda' or any
// 'cuda:N' (each rank's is its own GPU) are taken; any other device is an error naming what works.
c10::optional<c10::Device> deviceArg(const Value* v, const std::string& fn);
// The `dim` argument (position i or keyword `name`), dflt when missing or None.
long long dimArg(const Args& a, size_t i, long long dflt, const char* name = "dim");
// The `dim` argument (position i or keyword), nullopt when missing or None.
c10::optional<int64_t> optionalDim(const Args& a, size_t i);
// The `dim` argument of a reduction (position i or keyword): an int or a tuple or list of them;
// nullopt when missing or None (every dimension).
std::optional<std::vector<int64_t>> dimsArg(const Args& a, size_t i);
// The `keepdim` argument (position i or keyword), false when missing.
bool keepdim(const Args& a, size_t i);
// The bool argument at position i or keyword `name`, dflt when missing.
bool flag(const Args& a, size_t i, const char* name, bool dflt);
// A (values, indices) result of Tensor.`op` as torch returns it: the named tuple
// torch.return_types.`op`, whose `.values` and `.indices` are its two tensors.
Value valuesIndices(const char* op, const std::tuple<at::Tensor, at::Tensor>& r);
// A tensor as nested lists of Python numbers (a number for a 0-d tensor).
Value fromTensorList(const at::Tensor& t);

}  // namespace shardscope::trace::builtin_args
