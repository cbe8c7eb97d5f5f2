// KvCache: the keys and values of every request of a generation on this rank, one buffer per
// layer holding all requests ([requests, capacity, kvHeadsPerRank, headDim]), preallocated to at
// least the longest request (prompt + max tokens) so decode steps write in place and a decode step
// of many requests can attend in one batched call. All buffers are views of one allocation, so
// that a cache kept for the next generation (DecodeState) is cleared in one kernel. An MLA model
// (DeepSeek-V2) keeps one part per token, the latent and its rope key ([.., 1, kv_lora + rope]),
// instead of keys and values per head.
#pragma once

#include <ATen/ATen.h>

#include <vector>

namespace shardscope {

// What a model keeps per token and layer on one rank; the engine allocates and reports the cache
// from it.
struct KvCacheLayout {
  int64_t heads = 1;    // KV heads on this rank (1 for a latent)
  int64_t headDim = 0;  // values per head (kv_lora_rank + qk_rope_head_dim for a latent)
  int64_t parts = 2;    // keys and values; 1: the latent alone
  // Ranks the tokens are split across (decode-context parallelism): each holds every
  // tokenShards-th token.
  int64_t tokenShards = 1;

  // Tokens of a `capacity`-token request this rank holds.
  int64_t localCapacity(int64_t capacity) const {
    return (capacity + tokenShards - 1) / tokenShards;
  }
  // Bytes a request's token costs this rank over `layers` layers, on average.
  double bytesPerToken(int64_t layers, int64_t elementSize) const {
    return double(layers * parts * heads * headDim * elementSize) / double(tokenShards);
  }
};

class KvCache {
 public:
  // Zero-filled: masked attention multiplies unseen slots by 0, which must not meet NaN garbage.
  // `parts` is 2 (keys, values) or 1 (a latent: keys() only). Holds layers [firstLayer,
  // firstLayer + numLayers): a pipeline stage keeps only its own layers' tokens.
  KvCache(int64_t numLayers, int64_t capacity, int64_t kvHeadsPerRank, int64_t headDim,
          at::TensorOptions options, int64_t requests = 1, int64_t parts = 2,
          int64_t firstLayer = 0);

  int64_t capacity() const { return capacity_; }
  int64_t requests() const { return storage_.size(2); }
  int64_t parts() const { return storage_.size(1); }
  int64_t bytes() const { return storage_.numel() * int64_t(storage_.element_size()); }
  // One request's buffers: [capacity, kvHeadsPerRank, headDim] views.
  at::Tensor keys(int64_t layer, int64_t slot = 0) const { return keys_[index(layer)][slot]; }
  at::Tensor values(int64_t layer, int64_t slot = 0) const { return values_[index(layer)][slot]; }
  // Every request's buffers: [requests, capacity, kvHeadsPerRank, headDim].
  const at::Tensor& allKeys(int64_t layer) const { return keys_[index(layer)]; }
  const at::Tensor& allValues(int64_t layer) const { return values_[index(layer)]; }
  int64_t firstLayer() const { return firstLayer_; }
  int64_t layers() const { return int64_t(keys_.size()); }
  // Zeroes the first `requests` x `capacity` entries of every layer (one kernel), so that a
  // reused cache holds nothing of the generation before.
  void clear(int64_t requests, int64_t capacity);

 private:
  // Position of decoder layer `layer` in this cache; throws for a layer of another stage.
  size_t index(int64_t layer) const;

  int64_t capacity_;
  int64_t firstLayer_;
  at::Tensor storage_;  // [layers, parts, requests, capacity, kvHeadsPerRank, headDim]
  std::vector<at::Tensor> keys_;
  std::vector<at::Tensor> values_;
};

}  // namespace shardscope
