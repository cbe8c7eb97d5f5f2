#include "silu_and_mul.h"

#ifdef SHARDSCOPE_WITH_CUDA_KERNELS
#include "../../kernels/fused_ops.h"
#endif

namespace shardscope {

SiluAndMul::SiluAndMul(std::string name, Module* parent) : Module(std::move(name), parent) {
  setPorts(ShardSpec(ShardKind::FusedColumn), ShardSpec::split(ShardKind::Column));
}

at::Tensor SiluAndMul::forward(const at::Tensor& x, const ForwardBatch& batch) const {
  PortValue in = PortValue::single(x);
  batch.visit(*this, PortRole::Input, in);
  const at::Tensor& gateUp = in.items[0];
  PortValue out;
#ifdef SHARDSCOPE_WITH_CUDA_KERNELS
  if (fused::usable(gateUp)) out = PortValue::single(fused::siluAndMul(gateUp));  // one pass
#endif
  if (out.items.empty()) {
    const int64_t half = gateUp.size(-1) / 2;
    out = PortValue::single(at::silu(gateUp.narrow(-1, 0, half)) * gateUp.narrow(-1, half, half));
  }
  batch.visit(*this, PortRole::Output, out);
  return out.items[0];
}

}  // namespace shardscope
