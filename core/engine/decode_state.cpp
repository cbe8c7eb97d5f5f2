#include "decode_state.h"

#include <algorithm>

#ifdef SHARDSCOPE_WITH_NCCL
#include "layer_graphs.h"
#endif

namespace shardscope {

DecodeState::~DecodeState() {
  graphs_.reset();  // graphs first: they point into the cache
}

KvCache& DecodeState::cache(const StageRank& stage, const KvCacheLayout& layout, int64_t requests,
                            int64_t capacity, at::TensorOptions options) {
  capacity = layout.localCapacity(capacity);
  const auto fits = [&] {
    if (!cache_ || cache_->firstLayer() != stage.firstLayer() || cache_->layers() != stage.layers())
      return false;
    const at::Tensor& keys = cache_->allKeys(stage.firstLayer());
    return cache_->requests() >= requests && cache_->capacity() >= capacity &&
           cache_->parts() == layout.parts && keys.size(-2) == layout.heads &&
           keys.size(-1) == layout.headDim && keys.options().dtype() == options.dtype() &&
           keys.device() == options.device();
  };
  if (fits()) {
    // All of its capacity: a decode step attends over a rounded-up span, masked, and a stale
    // non-finite key there would still turn the masked scores into NaN.
    cache_->clear(requests, cache_->capacity());
    return *cache_;
  }
  const int64_t rows = cache_ ? std::max(requests, cache_->requests()) : requests;
  const int64_t tokens = cache_ ? std::max(capacity, cache_->capacity()) : capacity;
  graphs_.reset();  // recorded against the old buffers
  cache_.reset();   // freed before the larger one is allocated
  cache_ = std::make_unique<KvCache>(stage.layers(), tokens, layout.heads, layout.headDim, options,
                                     rows, layout.parts, stage.firstLayer());
  return *cache_;
}

LayerReplayer* DecodeState::replayer(ProcessGroup& group, at::Device device) {
  if (!cudaGraphs_ || !device.is_cuda() || !group.graphCapturable()) return nullptr;
#ifdef SHARDSCOPE_WITH_NCCL
  if (!graphs_) graphs_ = std::make_unique<LayerGraphs>(group, device);
  return graphs_.get();
#else
  return nullptr;
#endif
}

void DecodeState::reset() {
  graphs_.reset();
  cache_.reset();
}

}  // namespace shardscope
