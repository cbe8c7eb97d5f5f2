// A tensor copied to host memory as plain C++ data: what crosses from the engine into the CLI, the
// session store and the UI, none of which include LibTorch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace shardscope {

enum class DType { F32, F16, BF16, F64, I64, I32, I16, I8, U8, Bool };

const char* dtypeName(DType d);  // "float32", "bfloat16", ... as torch prints them
size_t dtypeSize(DType d);
// Accepts bf16/bfloat16, f16/float16/half, f32/float32/float (the floating types a model runs in).
DType parseDType(const std::string& s);
// Accepts every name dtypeName() gives; throws for others.
DType dtypeFromName(const std::string& name);

struct HostTensor {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<std::byte> bytes;  // row-major, contiguous

  int64_t numel() const;
  std::vector<float> toFloats() const;  // converts any floating or integer dtype
  std::vector<int64_t> toInt64() const;
  double element(int64_t i) const;  // element i (row-major) as a double
  std::string shapeString() const;  // "[5, 6144]"
};

}  // namespace shardscope
