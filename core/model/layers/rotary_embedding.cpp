#include "rotary_embedding.h"

#include <cmath>
#include <tuple>

#ifdef SHARDSCOPE_WITH_CUDA_KERNELS
#include "../../kernels/fused_ops.h"
#endif

namespace shardscope {
namespace {

at::Tensor inverseFrequencies(const ModelConfig& c) {
  const int64_t d = c.headDim;
  // Same arithmetic as transformers: base ** (arange(0, d, 2).float() / d), in fp32.
  at::Tensor exponents = at::arange(0, d, 2, at::kLong).to(at::kFloat) / double(d);
  at::Tensor inv = 1.0 / at::pow(at::scalar_tensor(c.ropeTheta, at::kFloat), exponents);
  if (c.ropeScaling.type != RopeType::Llama3) return inv;
  const auto& s = c.ropeScaling;
  const double lowWavelen = double(s.originalMaxPositions) / s.lowFreqFactor;
  const double highWavelen = double(s.originalMaxPositions) / s.highFreqFactor;
  at::Tensor wavelen = 2.0 * M_PI / inv;
  at::Tensor scaled = at::where(wavelen > lowWavelen, inv / s.factor, inv);
  at::Tensor smooth = (double(s.originalMaxPositions) / wavelen - s.lowFreqFactor) /
                      (s.highFreqFactor - s.lowFreqFactor);
  at::Tensor smoothed = (1 - smooth) * scaled / s.factor + smooth * scaled;
  at::Tensor medium = (wavelen >= highWavelen) & (wavelen <= lowWavelen);
  return at::where(medium, smoothed, scaled);
}

}  // namespace

// HF computes cos/sin in fp32 and casts them to the activation dtype: the cast tables come from
// the fp32 ones, not from an earlier cast.
std::pair<at::Tensor, at::Tensor> RotaryEmbedding::tables(at::Device device,
                                                          at::ScalarType dtype) const {
  const at::Tensor pos = at::arange(config_.maxPositions, at::kLong).to(at::kFloat);
  const at::Tensor freqs = at::outer(pos, inverseFrequencies(config_));  // [P, d/2]
  return {freqs.cos().to(device, dtype), freqs.sin().to(device, dtype)};
}

RotaryEmbedding::RotaryEmbedding(std::string name, Module* parent, const ModelConfig& config)
    : Module(std::move(name), parent), headDim_(config.headDim), config_(config) {
  setPorts(ShardSpec::whole(), ShardSpec::split(ShardKind::Head));
  std::tie(cos_, sin_) = tables(at::Device(at::kCPU), at::kFloat);
}

void RotaryEmbedding::to(at::Device device) {
  cos_ = cos_.to(device);
  sin_ = sin_.to(device);
}

void RotaryEmbedding::setActivationDtype(at::ScalarType dtype) {
  std::tie(cos_, sin_) = tables(cos_.device(), dtype);  // once, where HF casts at every call
}

at::Tensor RotaryEmbedding::rotate(const at::Tensor& x, const at::Tensor& cos,
                                   const at::Tensor& sin) const {
  const int64_t T = x.size(0);
  at::Tensor h = x.view({T, -1, headDim_});
  at::Tensor x1 = h.narrow(-1, 0, headDim_ / 2), x2 = h.narrow(-1, headDim_ / 2, headDim_ / 2);
  // HF casts cos/sin to the activation dtype before multiplying.
  at::Tensor c = cos.to(x.scalar_type()).unsqueeze(1), s = sin.to(x.scalar_type()).unsqueeze(1);
  return at::cat({x1 * c - x2 * s, x2 * c + x1 * s}, -1).view({T, -1});
}

std::pair<at::Tensor, at::Tensor> RotaryEmbedding::forward(const at::Tensor& positions,
                                                           const at::Tensor& q, const at::Tensor& k,
                                                           const ForwardBatch& batch) const {
  PortValue in = PortValue::single(positions);
  batch.visit(*this, PortRole::Input, in);
  const at::Tensor& p = in.items[0];  // the engine keeps positions below max_position_embeddings
  PortValue out = PortValue::pair(at::Tensor(), at::Tensor());
#ifdef SHARDSCOPE_WITH_CUDA_KERNELS
  // q and k in one kernel, reading the tables at the positions (was 16 elementwise launches).
  if (fused::usable(q, cos_) && fused::usable(k, cos_) && p.device() == q.device() &&
      q.dim() == 2 && k.dim() == 2) {
    std::tie(out.items[0], out.items[1]) = fused::rotary(q, k, cos_, sin_, p, headDim_);
  }
#endif
  if (!out.items[0].defined()) {
    at::Tensor cos = cos_.index_select(0, p), sin = sin_.index_select(0, p);
    out = PortValue::pair(rotate(q, cos, sin), rotate(k, cos, sin));
  }
  batch.visit(*this, PortRole::Output, out);
  return {out.items[0], out.items[1]};
}

}  // namespace shardscope
