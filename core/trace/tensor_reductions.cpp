#include "tensor_reductions.h"

#include <ATen/ATen.h>

#include <optional>
#include <string>
#include <vector>

#include "builtin_args.h"
#include "interpreter.h"
#include "result_sizes.h"

namespace shardscope::trace {

using namespace builtin_args;

namespace {

// Every dimension of x: a reduction over all of them that keeps them (x.sum(keepdim=True)).
std::vector<int64_t> allDims(const at::Tensor& x) {
  std::vector<int64_t> dims(size_t(x.dim()));
  for (size_t i = 0; i < dims.size(); ++i) dims[i] = int64_t(i);
  return dims;
}

// The dimensions a reduction's `dim` (argument dimAt: 0 but for norm's, after p) and `keepdim`
// (argument keepAt) name; nullopt for a reduction of every element to a 0-d tensor.
std::optional<std::vector<int64_t>> reduced(const at::Tensor& x, Args& a, size_t keepAt,
                                            size_t dimAt = 0) {
  if (auto dims = dimsArg(a, dimAt)) return dims;
  if (keepdim(a, keepAt)) return allDims(x);
  return std::nullopt;
}

// The divisor's correction of std and var: unbiased=True (the default) is correction=1,
// unbiased=False correction=0; torch takes one or the other.
int64_t correctionOf(const Args& a, const char* fn) {
  const Value* correction = a.keyword("correction");
  if (!correction || (*correction)->type == Type::None) return flag(a, 1, "unbiased", true) ? 1 : 0;
  if (a.get(1, "unbiased"))
    throw RuntimeFailure(std::string(fn) +
                         "() takes unbiased= or correction=, not both: unbiased=False is "
                         "correction=0");
  return asInt(*correction, "correction");
}

// Asks the budget for what `reduce` makes of x before the real op runs. `reduce` runs first on
// metaLike(x), which gives ATen's own result (its sizes and dtypes, its checks) with no memory:
// where ATen refuses the arguments nothing is asked, so the real op raises torch's error; where
// this LibTorch has no meta kernel (std and var in 1.13), `fallback` is asked. A reduction of an
// expanded view can make most of its elements (e.expand(n, n, 2).sum(2)). With `castsInput` (sum,
// prod, mean), a result dtype other than x's counts the copy of x that ATen's CPU reduction makes
// in that dtype before it reduces (a sum of bools or ints, dtype=).
template <typename Reduce>
void askFor(Args& a, const at::Tensor& x, Reduce reduce, int64_t fallback,
            bool castsInput = false) {
  // A small x is not worth the meta run (about 10 us): whatever a reduction makes of it (values,
  // int64 indices, a cast copy) is at most 2 MiB, and it is charged once made.
  if (tensorBytes(x.sizes(), at::kLong) <= kSmallOperandBytes) return;
  const at::Tensor m = metaLike(x);
  const MetaRun run = runOnMeta([&] { return std::vector<at::Tensor>(reduce(m)); });
  if (run.outcome == MetaRun::Outcome::Refused) return;
  if (run.outcome == MetaRun::Outcome::NoKernel) return interpreterOf(a).requestMemory(fallback);
  int64_t bytes = run.bytes();
  const at::ScalarType made = run.made.front().scalar_type();
  if (castsInput && made != x.scalar_type()) bytes += tensorBytes(x.sizes(), made);
  interpreterOf(a).requestMemory(bytes);
}

// What sum and prod give without a dtype=: int64 for bool and integer tensors, as torch does.
// Without a dim it says whether there is a cast copy to ask for; with one, the meta run says.
at::ScalarType accumulatedType(const at::Tensor& x, c10::optional<at::ScalarType> dtype) {
  if (dtype) return *dtype;
  return at::isIntegralType(x.scalar_type(), /*includeBool=*/true) ? at::kLong : x.scalar_type();
}

}  // namespace

// sum(dim=None, keepdim=False, *, dtype=None) and mean, alike.
Value sumOrMean(const at::Tensor& x, Args& a, bool mean) {
  const auto dtype = dtypeArg(a.keyword("dtype"), mean ? "Tensor.mean" : "Tensor.sum");
  const auto dims = reduced(x, a, 1);
  const at::ScalarType made = mean ? dtype.value_or(x.scalar_type()) : accumulatedType(x, dtype);
  if (!dims) {  // one value: only the copy of x into another dtype is worth asking for
    if (made != x.scalar_type())
      askFor(
          a, x,
          [&](const at::Tensor& m) { return std::vector{mean ? m.mean(dtype) : m.sum(dtype)}; },
          tensorBytes({}, made), /*castsInput=*/true);
    return tensor(mean ? x.mean(dtype) : x.sum(dtype));
  }
  const at::IntArrayRef d(*dims);
  const bool keep = keepdim(a, 1);
  askFor(
      a, x,
      [&](const at::Tensor& m) {
        return std::vector{mean ? m.mean(d, keep, dtype) : m.sum(d, keep, dtype)};
      },
      reducedBytes(x, d, made), /*castsInput=*/true);
  return tensor(mean ? x.mean(d, keep, dtype) : x.sum(d, keep, dtype));
}

// std(dim=None, unbiased=True, keepdim=False, *, correction=1) and var, alike: ATen's own
// correction overload (the divisor max(0, N - correction)), which unbiased= also runs.
Value stdOrVar(const at::Tensor& x, Args& a, bool var) {
  const c10::optional<int64_t> correction = correctionOf(a, var ? "Tensor.var" : "Tensor.std");
  const auto dims = reduced(x, a, 2);
  const at::OptionalIntArrayRef d =
      dims ? at::OptionalIntArrayRef(*dims) : at::OptionalIntArrayRef(c10::nullopt);
  const bool keep = dims && keepdim(a, 2);
  const auto reduce = [&](const at::Tensor& t) {
    return var ? t.var(d, correction, keep) : t.std(d, correction, keep);
  };
  if (dims)
    askFor(
        a, x, [&](const at::Tensor& m) { return std::vector{reduce(m)}; },
        reducedBytes(x, *dims, x.scalar_type()));
  return tensor(reduce(x));
}

// max(dim=None, keepdim=False) and min: with a dim, (values, indices).
Value extreme(const at::Tensor& x, Args& a, bool max) {
  // max(other) with a tensor (torch.max(a, b)) is the elementwise maximum, as in torch.
  const Value* other = a.keyword("other");
  const bool otherByPosition =
      !other && !a.positional.empty() && a.positional[0]->type == Type::Tensor;
  if (otherByPosition) other = &a.positional[0];
  if (other) {
    if (a.positional.size() > size_t(otherByPosition) || a.keyword("dim") || a.keyword("keepdim"))
      throw RuntimeFailure(std::string("Tensor.") + (max ? "max" : "min") +
                           "(other) is elementwise and takes no dim or keepdim");
    const at::Tensor y = toTensor(*other);
    interpreterOf(a).requestMemory(broadcastBytes(x, y, at::result_type(x, y)));
    return tensor(max ? at::maximum(x, y) : at::minimum(x, y));
  }
  const auto dim = optionalDim(a, 0);
  if (!dim) {
    if (keepdim(a, 1))
      throw RuntimeFailure(std::string("Tensor.") + (max ? "max" : "min") +
                           "(keepdim=True) needs a dim");
    // ATen's max of every element reads a contiguous copy of an expanded view first (e.max() of
    // 2 * 10**8 repeated floats took 800 MB).
    interpreterOf(a).requestMemory(expandedCopyBytes(x));
    return tensor(max ? x.max() : x.min());
  }
  const bool keep = keepdim(a, 1);
  const auto reduce = [&](const at::Tensor& t) {
    return max ? t.max(*dim, keep) : t.min(*dim, keep);
  };
  askFor(
      a, x,
      [&](const at::Tensor& m) {
        auto [values, indices] = reduce(m);
        return std::vector{values, indices};
      },
      reducedBytes(x, {*dim}, x.scalar_type()) + reducedBytes(x, {*dim}, at::kLong));
  return valuesIndices(max ? "max" : "min", reduce(x));
}

// any(dim=None, keepdim=False) and all.
Value anyOrAll(const at::Tensor& x, Args& a, bool any) {
  const auto dim = optionalDim(a, 0);
  if (dim) {
    const bool keep = keepdim(a, 1);
    const auto reduce = [&](const at::Tensor& t) {
      return any ? t.any(*dim, keep) : t.all(*dim, keep);
    };
    askFor(
        a, x, [&](const at::Tensor& m) { return std::vector{reduce(m)}; },
        reducedBytes(x, {*dim}, at::kBool));
    return tensor(reduce(x));
  }
  // Of every element: ATen first makes a bool copy of an expanded view's elements (e.any() of
  // 2 * 10**8 repeated floats took 190 MB).
  if (expandedCopyBytes(x) > 0) interpreterOf(a).requestMemory(tensorBytes(x.sizes(), at::kBool));
  const at::Tensor r = any ? x.any() : x.all();
  return tensor(keepdim(a, 1) ? r.reshape(std::vector<int64_t>(size_t(x.dim()), 1)) : r);
}

// norm(p='fro', dim=None, keepdim=False): p a number or 'fro' (the 2-norm of the elements).
Value normOf(const at::Tensor& x, Args& a) {
  double p = 2;
  if (const Value* v = a.get(0, "p"); v && (*v)->type != Type::None) {
    if ((*v)->type == Type::Str && (*v)->str != "fro")
      throw RuntimeFailure("Tensor.norm(): p must be a number or 'fro', got " + repr(*v));
    if ((*v)->type != Type::Str) p = asNumber(*v, "p");
  }
  const auto dims = reduced(x, a, 2, 1);  // x.norm(1) is the 1-norm of every element, not dim 1's
  if (!dims) return tensor(at::norm(x, p));
  const bool keep = keepdim(a, 2);
  askFor(
      a, x, [&](const at::Tensor& m) { return std::vector{at::norm(m, p, *dims, keep)}; },
      reducedBytes(x, *dims, x.scalar_type()));
  return tensor(at::norm(x, p, at::IntArrayRef(*dims), keep));
}

// prod(dim=None, keepdim=False, *, dtype=None): one dim at most, as torch takes.
Value prodOf(const at::Tensor& x, Args& a) {
  const auto dtype = dtypeArg(a.keyword("dtype"), "Tensor.prod");
  const auto dim = optionalDim(a, 0);
  if (!dim) {
    if (keepdim(a, 1)) throw RuntimeFailure("Tensor.prod(keepdim=True) needs a dim");
    if (accumulatedType(x, dtype) != x.scalar_type())  // as sum's
      askFor(
          a, x, [&](const at::Tensor& m) { return std::vector{m.prod(dtype)}; },
          tensorBytes({}, accumulatedType(x, dtype)), /*castsInput=*/true);
    return tensor(x.prod(dtype));
  }
  const bool keep = keepdim(a, 1);
  askFor(
      a, x, [&](const at::Tensor& m) { return std::vector{m.prod(*dim, keep, dtype)}; },
      reducedBytes(x, {*dim}, accumulatedType(x, dtype)), /*castsInput=*/true);
  return tensor(x.prod(*dim, keep, dtype));
}

// amax(dim=(), keepdim=False) and amin: every dim when none is given.
Value extremeValues(const at::Tensor& x, Args& a, bool max) {
  const auto dims = dimsArg(a, 0).value_or(std::vector<int64_t>{});
  const bool keep = keepdim(a, 1);
  const auto reduce = [&](const at::Tensor& t) {
    return max ? t.amax(dims, keep) : t.amin(dims, keep);
  };
  askFor(
      a, x, [&](const at::Tensor& m) { return std::vector{reduce(m)}; },
      reducedBytes(x, dims, x.scalar_type()));
  return tensor(reduce(x));
}

// argmax(dim=None, keepdim=False) and argmin: int64 indices, of the flattened tensor without a dim.
Value extremeIndex(const at::Tensor& x, Args& a, bool max) {
  const auto dim = optionalDim(a, 0);
  const bool keep = keepdim(a, 1);
  const auto reduce = [&](const at::Tensor& t) {
    return max ? t.argmax(dim, keep) : t.argmin(dim, keep);
  };
  if (dim)
    askFor(
        a, x, [&](const at::Tensor& m) { return std::vector{reduce(m)}; },
        reducedBytes(x, {*dim}, at::kLong));
  return tensor(reduce(x));
}

}  // namespace shardscope::trace
