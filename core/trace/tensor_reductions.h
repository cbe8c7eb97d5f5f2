// The reductions among the tensor methods (x.sum, mean, std, var, max, min, any, all, norm, prod,
// amax, amin, argmax, argmin), each taking torch's arguments by its names and positions (dim a
// number or a tuple, keepdim, dtype, unbiased or correction) and refusing the mixes torch refuses.
// A reduction over some dims asks the memory budget for its result before making it.
#pragma once

#include <ATen/core/Tensor.h>

#include "value.h"

namespace shardscope::trace {

// sum(dim=None, keepdim=False, *, dtype=None), and mean alike.
Value sumOrMean(const at::Tensor& x, CallArgs& a, bool mean);
// std(dim=None, unbiased=True, keepdim=False, *, correction=1), and var alike.
Value stdOrVar(const at::Tensor& x, CallArgs& a, bool var);
// max(dim=None, keepdim=False) and min: with a dim, (values, indices); with a tensor `other`, the
// elementwise maximum (minimum).
Value extreme(const at::Tensor& x, CallArgs& a, bool max);
// any(dim=None, keepdim=False), and all alike.
Value anyOrAll(const at::Tensor& x, CallArgs& a, bool any);
// norm(p='fro', dim=None, keepdim=False): p a number or 'fro' (the 2-norm of the elements).
Value normOf(const at::Tensor& x, CallArgs& a);

// prod(dim=None, keepdim=False, *, dtype=None).
Value prodOf(const at::Tensor& x, CallArgs& a);
// amax(dim=(), keepdim=False), and amin alike.
Value extremeValues(const at::Tensor& x, CallArgs& a, bool max);
// argmax(dim=None, keepdim=False), and argmin alike.
Value extremeIndex(const at::Tensor& x, CallArgs& a, bool max);

}  // namespace shardscope::trace
