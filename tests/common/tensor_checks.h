// Scale-aware tensor comparisons for the suites. Results of different shardings (or of different
// CPUs' BLAS kernels) differ by rounding that grows with the values' magnitude, so an absolute
// tolerance passes on one machine and fails on the next; these compare against the reference's
// scale.
#pragma once

#include <ATen/ATen.h>

#include <algorithm>
#include <string>

namespace shardscope::test {

// max |ours - ref| / max |ref| in double (0 when both are all zero).
inline double maxRelativeError(const at::Tensor& ours, const at::Tensor& ref) {
  const at::Tensor a = ours.to(at::kCPU, at::kDouble), b = ref.to(at::kCPU, at::kDouble);
  const double diff = (a - b).abs().max().item<double>();
  const double scale = b.abs().max().item<double>();
  if (scale == 0) return diff;
  return diff / scale;
}

// Same shape and max relative error within `tolerance`.
inline bool closeToScale(const at::Tensor& ours, const at::Tensor& ref, double tolerance = 1e-5) {
  if (!ours.defined() || !ref.defined() || ours.sizes() != ref.sizes()) return false;
  if (ours.numel() == 0) return true;
  return maxRelativeError(ours, ref) <= tolerance;
}

// A failure message that says how far apart the two are.
inline std::string closeToScaleMessage(const at::Tensor& ours, const at::Tensor& ref) {
  if (!ours.defined() || !ref.defined()) return "a tensor is undefined";
  if (ours.sizes() != ref.sizes()) return "shapes differ";
  return "max relative error " + std::to_string(maxRelativeError(ours, ref));
}

}  // namespace shardscope::test
