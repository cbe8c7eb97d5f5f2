// Conversions between LibTorch tensors and HostTensor (float32), for core code that hands results
// to torch-free callers, and for tests that compare those results as tensors.
#pragma once

#include <ATen/ATen.h>

#include <cstring>

#include "error.h"
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

// The torch scalar type of a HostTensor dtype and back; throws for torch types HostTensor lacks.
inline at::ScalarType scalarTypeOf(DType d) {
  switch (d) {
    case DType::F32:
      return at::kFloat;
    case DType::F16:
      return at::kHalf;
    case DType::BF16:
      return at::kBFloat16;
    case DType::F64:
      return at::kDouble;
    case DType::I64:
      return at::kLong;
    case DType::I32:
      return at::kInt;
    case DType::I16:
      return at::kShort;
    case DType::I8:
      return at::kChar;
    case DType::U8:
      return at::kByte;
    case DType::Bool:
      return at::kBool;
  }
  return at::kFloat;
}

inline DType dtypeOf(at::ScalarType t) {
  for (DType d : {DType::F32, DType::F16, DType::BF16, DType::F64, DType::I64, DType::I32,
                  DType::I16, DType::I8, DType::U8, DType::Bool}) {
    if (scalarTypeOf(d) == t) return d;
  }
  throw Error(std::string("tensors of dtype ") + c10::toString(t) +
              " cannot leave the engine; convert with .float() first");
}

// Any tensor, on any device, as host bytes of its own dtype.
inline HostTensor toHost(const at::Tensor& t) {
  const at::Tensor c = t.detach().to(at::kCPU).contiguous();
  HostTensor h;
  h.dtype = dtypeOf(c.scalar_type());
  h.shape = c.sizes().vec();
  h.bytes.resize(size_t(c.numel()) * dtypeSize(h.dtype));
  if (c.numel() > 0) std::memcpy(h.bytes.data(), c.data_ptr(), h.bytes.size());
  return h;
}

// A HostTensor of any dtype as a CPU tensor (copied).
inline at::Tensor fromHost(const HostTensor& h) {
  at::Tensor t = at::empty(h.shape, scalarTypeOf(h.dtype));
  if (t.numel() > 0) std::memcpy(t.data_ptr(), h.bytes.data(), h.bytes.size());
  return t;
}

// A float32 HostTensor as a CPU tensor (copied).
inline at::Tensor fromHostFloat(const HostTensor& h) {
  at::Tensor t = at::empty(h.shape, at::kFloat);
  if (t.numel() > 0) std::memcpy(t.data_ptr(), h.bytes.data(), h.bytes.size());
  return t;
}

}  // namespace shardscope
