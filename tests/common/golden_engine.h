// EngineOptions for the golden checkpoints (tests/golden/models) on the suite's device and
// backend (SHARDSCOPE_TEST_DEVICE, SHARDSCOPE_TEST_BACKEND), shared by the suites that compare
// the engine with transformers.
#pragma once

#include <ATen/ATen.h>

#include <string>

#include "common/test_support.h"
#include "core/engine/engine.h"

namespace shardscope::test {

inline EngineOptions goldenEngineOptions(const std::string& model, int tp,
                                         const std::string& dtype = "f32") {
  EngineOptions o;
  o.model = goldenModel(model).string();
  o.tp = tp;
  o.device = deviceKind();
  o.dtype = parseDType(dtype);
  o.backend = groupBackend();
  return o;
}

// Whether every rank of `o` gets a GPU of its own, as NCCL needs (the local group needs none).
inline bool hasGpuPerRank(const EngineOptions& o) {
  return o.backend != GroupBackend::Nccl || int(at::getNumGPUs()) >= o.tp * o.pp;
}

}  // namespace shardscope::test
