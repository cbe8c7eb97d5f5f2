// Conversions between LibTorch tensors and HostTensor (float32), for core code that hands results
// to torch-free callers, and for tests that compare those results as tensors.
#pragma once

#include <ATen/ATen.h>

#include <cstring>

#include "host_tensor.h"

namespace shardscope {

// Any tensor, on any device, as float32 host bytes.
inline HostTensor toHostFloat(const at::Tensor& t) {
  const at::Tensor c = t.detach().to(at::kCPU, at::kFloat).contiguous();
  HostTensor h;
  h.dtype = DType::F32;
  h.shape = c.sizes().vec();
  h.bytes.resize(size_t(c.numel()) * sizeof(float));
  if (c.numel() > 0) std::memcpy(h.bytes.data(), c.data_ptr<float>(), h.bytes.size());
  return h;
}

// A float32 HostTensor as a CPU tensor (copied).
inline at::Tensor fromHostFloat(const HostTensor& h) {
  at::Tensor t = at::empty(h.shape, at::kFloat);
  if (t.numel() > 0) std::memcpy(t.data_ptr(), h.bytes.data(), h.bytes.size());
  return t;
}

}  // namespace shardscope
