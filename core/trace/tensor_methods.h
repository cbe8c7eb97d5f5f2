// The tensor methods of trace scripts (`x.sum(-1)`, `x.topk(5, dim=0)`), each with what it takes:
// tensor_methods.cpp holds the table, which tensorAttribute (interpreter.h) binds to a tensor, the
// deferred calls check before holding one, and torch functions of the same name (torch.topk(x,
// 5)) share.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <string>

#include "builtin_args.h"

namespace shardscope::trace {

struct TensorMethod {
  builtin_args::Takes takes;  // what it takes after the tensor itself
  std::function<Value(const at::Tensor& self, CallArgs& args)> call;  // after checkArguments
};

// The method `name` ("sum"), nullptr when tensors have none of that name.
const TensorMethod* tensorMethod(const std::string& name);
// x.nonzero() and torch.where(x): the indices of x's nonzero elements, a row each, or (asTuple) a
// tensor of them a dimension; the budget is asked for them first.
Value nonzeroIndices(Interpreter& in, const at::Tensor& x, bool asTuple);
// x.split(sizes, dim) and torch.split: `sizes` one size or a list of sizes; a tuple of views.
Value splitTensor(const at::Tensor& x, const Value& sizes, int64_t dim);
// "shape, dtype, ..., zero_": the properties and methods, for the error naming an unknown one.
std::string tensorAttributeNames();

}  // namespace shardscope::trace
