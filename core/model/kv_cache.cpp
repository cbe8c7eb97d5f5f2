#include "kv_cache.h"

namespace shardscope {

KvCache::KvCache(int64_t numLayers, int64_t capacity, int64_t kvHeadsPerRank, int64_t headDim,
                 at::TensorOptions options, int64_t requests)
    : capacity_(capacity) {
  keys_.reserve(numLayers);
  values_.reserve(numLayers);
  for (int64_t l = 0; l < numLayers; ++l) {
    keys_.push_back(at::empty({requests, capacity, kvHeadsPerRank, headDim}, options));
    values_.push_back(at::empty({requests, capacity, kvHeadsPerRank, headDim}, options));
  }
}

}  // namespace shardscope
