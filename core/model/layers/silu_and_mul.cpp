#include "silu_and_mul.h"

namespace shardscope {

SiluAndMul::SiluAndMul(std::string name, Module* parent) : Module(std::move(name), parent) {
  setPorts({"", ShardKind::FusedColumn, -1}, {"", ShardKind::Column, -1});
}

at::Tensor SiluAndMul::forward(const at::Tensor& x, const ForwardBatch& batch) const {
  PortValue in = PortValue::single(x);
  batch.visit(*this, PortRole::Input, in);
  const int64_t half = in.items[0].size(-1) / 2;
  PortValue out = PortValue::single(at::silu(in.items[0].narrow(-1, 0, half)) *
                                    in.items[0].narrow(-1, half, half));
  batch.visit(*this, PortRole::Output, out);
  return out.items[0];
}

}  // namespace shardscope
