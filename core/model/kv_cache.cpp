#include "kv_cache.h"

namespace shardscope {

KvCache::KvCache(int64_t numLayers, int64_t capacity, int64_t kvHeadsPerRank, int64_t headDim,
                 at::TensorOptions options, int64_t requests, int64_t parts)
    : capacity_(capacity),
      storage_(
          at::zeros({numLayers, parts, requests, capacity, kvHeadsPerRank, headDim}, options)) {
  keys_.reserve(numLayers);
  values_.reserve(numLayers);
  for (int64_t l = 0; l < numLayers; ++l) {
    keys_.push_back(storage_[l][0]);
    if (parts > 1) values_.push_back(storage_[l][1]);
  }
}

void KvCache::clear(int64_t requests, int64_t capacity) {
  storage_.narrow(2, 0, requests).narrow(3, 0, capacity).zero_();
}

}  // namespace shardscope
