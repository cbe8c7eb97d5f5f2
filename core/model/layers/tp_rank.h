// TpRank: this rank's place in the tensor-parallel group, as the layers need it at load time.
#pragma once

#include <ATen/ATen.h>

namespace shardscope {

struct TpRank {
  int rank = 0;
  int size = 1;
};

// What every layer's load() needs: where shards come from, and how to store them.
struct LoadContext {
  class WeightSource& source;
  TpRank tp;
  at::ScalarType dtype = at::kFloat;
  at::Device device = at::kCPU;
};

}  // namespace shardscope
