// Sampler: picks the next token of one request from its logits row. Greedy when temperature is 0
// (argmax; ties go to the lowest id, as torch.argmax). Otherwise temperature, then top-k, then
// top-p, then one draw from a counter-based generator seeded by (seed, request index), in double
// precision on the host, so the same seed gives the same text on every device and tp.
#pragma once

#include <ATen/ATen.h>

#include "engine_types.h"

namespace shardscope {

class Sampler {
 public:
  Sampler(const SamplingParams& params, int64_t requestIndex);
  // logits: [V] on any device.
  int64_t sample(const at::Tensor& logits);

 private:
  double nextUniform();  // in [0, 1)

  SamplingParams params_;
  uint64_t state_;
};

}  // namespace shardscope
