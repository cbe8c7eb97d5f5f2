// The bytes a tensor operation's result will take, worked out from its operands before it runs, so
// the memory budget can refuse a result that does not fit instead of allocating it first: a
// broadcast or an outer product grows with the product of its operands (`x[:, None] * x[None, :]`
// on 10**5 values is 40 GB), and an expanded view holds no memory until an op materialises it.
// Operands that do not fit together give 0: the operation then raises torch's own error.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace shardscope::trace {

// Bytes of `dtype` for the element count that `sizes` multiply to; past 2**60 (or overflowing) it
// stays at 2**60, more than any memory and far from overflowing a sum.
int64_t tensorBytes(c10::IntArrayRef sizes, at::ScalarType dtype);
// The elementwise result of x and y (and z when defined: torch.where) broadcast together.
int64_t broadcastBytes(const at::Tensor& x, const at::Tensor& y, at::ScalarType dtype,
                       const at::Tensor& z = {});
// x @ y (torch.matmul's rules for 1-D operands and batch dimensions), and the copies ATen makes
// of an operand whose batch dimensions broadcast.
int64_t matmulBytes(const at::Tensor& x, const at::Tensor& y);
// torch.cat or torch.stack of `parts`: their elements in the dtype they promote to.
int64_t concatenatedBytes(const std::vector<at::Tensor>& parts);
// torch.einsum(equation, operands): the larger of the output (its labels sized from the operands:
// "i,j->ij" is an outer product) and the largest intermediate of ATen's left-to-right
// contraction ("i,j,j->i" holds (i, j)); 0 for an equation this does not read (torch checks it).
int64_t einsumBytes(const std::string& equation, const std::vector<at::Tensor>& operands);
// An op run on meta tensors (metaLike: shapes and dtypes, no memory) to learn what the real one
// would make: ATen's own checks, result shapes and dtypes. Refused: ATen refuses the arguments
// (the real op then raises the same error); NoKernel: this LibTorch has no meta kernel for the op
// (std and var in 1.13).
at::Tensor metaLike(const at::Tensor& x);
struct MetaRun {
  enum class Outcome { Made, Refused, NoKernel } outcome = Outcome::Made;
  std::vector<at::Tensor> made;
  int64_t bytes() const;  // of everything made
};
MetaRun runOnMeta(const std::function<std::vector<at::Tensor>()>& op);
// Below this many bytes of int64s an operand's result is not worth a meta run: charged once made.
inline constexpr int64_t kSmallOperandBytes = int64_t(1) << 20;
// x reduced over `dims` (x.sum(1), x.amax((0, 2)), x.max(1)'s values): the elements of its other
// dimensions, in `dtype` (keepdim's ones change no count); 0 for a dim out of range (torch's own
// error). Its result can be most of an expanded view's elements: e.expand(n, n, 2).sum(2).
int64_t reducedBytes(const at::Tensor& x, c10::IntArrayRef dims, at::ScalarType dtype);
// x.reshape(shape) (one -1 inferred): 0 where torch gives a view, else the copy's bytes; a shape
// that does not fit x's elements raises torch's own error here.
int64_t reshapedBytes(const at::Tensor& x, c10::IntArrayRef shape);
// x.flatten(start, end): likewise (0 for dims it cannot flatten: torch's own error).
int64_t flattenedBytes(const at::Tensor& x, int64_t start, int64_t end);
// How many of x's elements are nonzero, counted on one copy of each dimension an expanded view
// repeats (on CUDA, count_nonzero makes a temporary of every element first).
int64_t trueCount(const at::Tensor& x);
// x[indices] where integer index tensors, masks or bools gather, in any mix with slices, ints,
// None and Ellipsis (x[ids], x[i, j], x[:, ids], x[x > 0], x[True]): the result's bytes, its
// shape worked out on the meta device (no memory, no copy) after counting each mask's true values
// (a wait for the device, as the selection's own). 0 where nothing gathers (a view) and for
// indices torch refuses (torch then says why when the real op runs; a mask whose shape does not
// fit x is counted first, so past the budget that error comes before torch's).
int64_t indexedBytes(const at::Tensor& x, c10::ArrayRef<at::indexing::TensorIndex> indices);
// A copy of every element of x: nonzero only for a view with more elements than its storage
// holds (x.expand(n, n)), whose copy (clone, exp, a cast) would allocate them all.
int64_t expandedCopyBytes(const at::Tensor& x);

}  // namespace shardscope::trace
