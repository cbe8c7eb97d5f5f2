#include "host_tensor.h"

#include <cstring>

#include "error.h"

namespace shardscope {
namespace {

float halfToFloat(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400) == 0);
      bits = sign | ((127 - 15 - e) << 23) | ((mant & 0x3ff) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

template <class T>
T load(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

double elementAsDouble(DType d, const std::byte* p) {
  switch (d) {
    case DType::F32:
      return load<float>(p);
    case DType::F64:
      return load<double>(p);
    case DType::F16:
      return halfToFloat(load<uint16_t>(p));
    case DType::BF16: {
      const uint32_t bits = uint32_t(load<uint16_t>(p)) << 16;
      float f;
      std::memcpy(&f, &bits, 4);
      return f;
    }
    case DType::I64:
      return double(load<int64_t>(p));
    case DType::I32:
      return load<int32_t>(p);
    case DType::I16:
      return load<int16_t>(p);
    case DType::I8:
      return load<int8_t>(p);
    case DType::U8:
      return load<uint8_t>(p);
    case DType::Bool:
      return load<uint8_t>(p) != 0;
  }
  return 0;
}

}  // namespace

const char* dtypeName(DType d) {
  switch (d) {
    case DType::F32:
      return "float32";
    case DType::F16:
      return "float16";
    case DType::BF16:
      return "bfloat16";
    case DType::F64:
      return "float64";
    case DType::I64:
      return "int64";
    case DType::I32:
      return "int32";
    case DType::I16:
      return "int16";
    case DType::I8:
      return "int8";
    case DType::U8:
      return "uint8";
    case DType::Bool:
      return "bool";
  }
  return "?";
}

size_t dtypeSize(DType d) {
  switch (d) {
    case DType::F64:
    case DType::I64:
      return 8;
    case DType::F32:
    case DType::I32:
      return 4;
    case DType::F16:
    case DType::BF16:
    case DType::I16:
      return 2;
    case DType::I8:
    case DType::U8:
    case DType::Bool:
      return 1;
  }
  return 1;
}

DType parseDType(const std::string& s) {
  if (s == "bf16" || s == "bfloat16") return DType::BF16;
  if (s == "f16" || s == "fp16" || s == "float16" || s == "half") return DType::F16;
  if (s == "f32" || s == "fp32" || s == "float32" || s == "float") return DType::F32;
  throw Error("unknown dtype '" + s + "': use bf16, f16 or f32");
}

DType dtypeFromName(const std::string& name) {
  for (DType d : {DType::F32, DType::F16, DType::BF16, DType::F64, DType::I64, DType::I32,
                  DType::I16, DType::I8, DType::U8, DType::Bool}) {
    if (name == dtypeName(d)) return d;
  }
  throw Error("unknown dtype name '" + name + "'");
}

double HostTensor::element(int64_t i) const {
  return elementAsDouble(dtype, bytes.data() + size_t(i) * dtypeSize(dtype));
}

int64_t HostTensor::numel() const {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

std::vector<float> HostTensor::toFloats() const {
  const int64_t n = numel();
  const size_t es = dtypeSize(dtype);
  SS_ASSERT(bytes.size() == size_t(n) * es, "host tensor byte count disagrees with its shape");
  std::vector<float> out(n);
  for (int64_t i = 0; i < n; ++i) out[i] = float(elementAsDouble(dtype, bytes.data() + i * es));
  return out;
}

std::vector<int64_t> HostTensor::toInt64() const {
  const int64_t n = numel();
  const size_t es = dtypeSize(dtype);
  std::vector<int64_t> out(n);
  for (int64_t i = 0; i < n; ++i) out[i] = int64_t(elementAsDouble(dtype, bytes.data() + i * es));
  return out;
}

std::string HostTensor::shapeString() const {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace shardscope
