#include "deepseek_scaling_rotary_embedding.h"

#include <algorithm>
#include <cmath>
#include <tuple>
#include <vector>

namespace shardscope {
double yarnMscale(double scale, double mscale) {
  return scale <= 1.0 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
}

namespace {

// Where along the rope dimension the frequency makes `rotations` turns over the original context.
double correctionDim(double rotations, int64_t dim, double base, int64_t originalMax) {
  return double(dim) * std::log(double(originalMax) / (rotations * 2.0 * M_PI)) /
         (2.0 * std::log(base));
}

}  // namespace

std::pair<at::Tensor, double> deepseekRopeFrequencies(const ModelConfig& c) {
  const int64_t dim = c.mla.qkRopeHeadDim;
  // Same arithmetic as transformers, in fp32: base ** (arange(0, dim, 2) / dim).
  const at::Tensor exponents = at::arange(0, dim, 2, at::kLong).to(at::kFloat) / double(dim);
  const at::Tensor posFreqs = at::pow(at::scalar_tensor(c.ropeTheta, at::kFloat), exponents);
  const RopeScaling& y = c.ropeScaling;
  if (y.type != RopeType::Yarn) return {1.0 / posFreqs, 1.0};
  const at::Tensor extrapolation = 1.0 / posFreqs;
  const at::Tensor interpolation = 1.0 / (y.factor * posFreqs);
  double low = std::floor(correctionDim(y.betaFast, dim, c.ropeTheta, y.originalMaxPositions));
  double high = std::ceil(correctionDim(y.betaSlow, dim, c.ropeTheta, y.originalMaxPositions));
  low = std::max(low, 0.0);
  high = std::min(high, double(dim - 1));
  if (low == high) high += 0.001;  // as transformers: no zero-width ramp
  const at::Tensor ramp = ((at::arange(dim / 2, at::kFloat) - low) / (high - low)).clamp(0.0, 1.0);
  const at::Tensor extrapolationFactor = 1.0 - ramp;
  const at::Tensor inv =
      interpolation * (1.0 - extrapolationFactor) + extrapolation * extrapolationFactor;
  double magnitude = y.attentionFactor;
  if (magnitude == 0.0) {
    magnitude = y.mscale != 0.0 && y.mscaleAllDim != 0.0
                    ? yarnMscale(y.factor, y.mscale) / yarnMscale(y.factor, y.mscaleAllDim)
                    : yarnMscale(y.factor, 1.0);
  }
  return {inv, magnitude};
}

DeepseekScalingRotaryEmbedding::DeepseekScalingRotaryEmbedding(std::string name, Module* parent,
                                                               const ModelConfig& config,
                                                               ShardSpec output)
    : Module(std::move(name), parent) {
  setPorts(ShardSpec::whole(), std::move(output));
  std::tie(invFreq_, magnitude_) = deepseekRopeFrequencies(config);
}

void DeepseekScalingRotaryEmbedding::to(at::Device device) {
  invFreq_ = invFreq_.to(device);
}

at::Tensor DeepseekScalingRotaryEmbedding::rotate(const at::Tensor& x, const at::Tensor& cos,
                                                  const at::Tensor& sin) const {
  // As HF: in fp32, each (even, odd) pair one complex number times (cos + i sin).
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() /= 2;
  shape.push_back(2);
  const at::Tensor pairs = x.to(at::kFloat).reshape(shape);  // [T, heads, rope/2, 2]
  const at::Tensor re = pairs.select(-1, 0), im = pairs.select(-1, 1);
  const at::Tensor c = cos.unsqueeze(1), s = sin.unsqueeze(1);  // [T, 1, rope/2]
  return at::stack({re * c - im * s, re * s + im * c}, -1).reshape(x.sizes()).to(x.scalar_type());
}

std::pair<at::Tensor, at::Tensor> DeepseekScalingRotaryEmbedding::forward(
    const at::Tensor& positions, const at::Tensor& qPe, const at::Tensor& kPe,
    const ForwardBatch& batch) const {
  PortValue in = PortValue::single(positions);
  batch.visit(*this, PortRole::Input, in);
  // As HF: the angles in fp32 for the step's positions, cos/sin scaled by the magnitude.
  const at::Tensor freqs = at::outer(in.items[0].to(at::kFloat), invFreq_);  // [T, rope/2]
  const at::Tensor cos = freqs.cos() * magnitude_, sin = freqs.sin() * magnitude_;
  PortValue out = PortValue::pair(rotate(qPe, cos, sin), rotate(kPe, cos, sin));
  batch.visit(*this, PortRole::Output, out);
  return {out.items[0], out.items[1]};
}

}  // namespace shardscope
