// TpRank: this rank's place in the tensor-parallel group, as the layers need it at load time.
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "../../parallel/pipeline_stages.h"

namespace shardscope {

struct TpRank {
  int rank = 0;
  int size = 1;
  // vLLM's enable_expert_parallel: MoE experts are split whole across the group's ranks instead
  // of every rank holding a slice of every expert.
  bool expertParallel = false;
  // vLLM's decode_context_parallel_size: MLA's latent KV cache is split along the tokens across
  // groups of `dcp` consecutive ranks (rank / dcp names the group), which share their query heads.
  int dcp = 1;
};

struct SliceSpec;

// What every layer's load() needs: where shards come from, and how to store them.
struct LoadContext {
  class WeightSource& source;
  TpRank tp;
  at::ScalarType dtype = at::kFloat;
  at::Device device = at::kCPU;
  StageRank stage;  // this rank's pipeline stage: which layers it builds weights for

  // `name`'s slice from `source` (WeightSource::loadOn) in this dtype, on this device.
  at::Tensor load(const std::string& name, const std::vector<int64_t>& fullShape,
                  const SliceSpec& slice) const;
};

}  // namespace shardscope
