#include "kv_cache.h"

#include <string>

#include "../error.h"

namespace shardscope {

KvCache::KvCache(int64_t numLayers, int64_t capacity, int64_t kvHeadsPerRank, int64_t headDim,
                 at::TensorOptions options, int64_t requests, int64_t parts, int64_t firstLayer)
    : capacity_(capacity),
      firstLayer_(firstLayer),
      storage_(
          at::zeros({numLayers, parts, requests, capacity, kvHeadsPerRank, headDim}, options)) {
  keys_.reserve(numLayers);
  values_.reserve(numLayers);
  for (int64_t l = 0; l < numLayers; ++l) {
    keys_.push_back(storage_[l][0]);
    if (parts > 1) values_.push_back(storage_[l][1]);
  }
}

size_t KvCache::index(int64_t layer) const {
  const int64_t i = layer - firstLayer_;
  if (i < 0 || i >= layers())
    throw Error("the KV cache of this rank holds layers " + std::to_string(firstLayer_) + " to " +
                std::to_string(firstLayer_ + layers() - 1) + ", not layer " +
                std::to_string(layer) + " (a layer of another pipeline stage)");
  return size_t(i);
}

void KvCache::clear(int64_t requests, int64_t capacity) {
  storage_.narrow(2, 0, requests).narrow(3, 0, capacity).zero_();
}

}  // namespace shardscope
