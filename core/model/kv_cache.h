// KvCache: the keys and values of every request of a generation on this rank, one buffer per
// layer holding all requests ([requests, capacity, kvHeadsPerRank, headDim]), preallocated to at
// least the longest request (prompt + max tokens) so decode steps write in place and a decode step
// of many requests can attend in one batched call. All buffers are views of one allocation, so
// that a cache kept for the next generation (DecodeState) is cleared in one kernel.
#pragma once

#include <ATen/ATen.h>

#include <vector>

namespace shardscope {

class KvCache {
 public:
  // Zero-filled: masked attention multiplies unseen slots by 0, which must not meet NaN garbage.
  KvCache(int64_t numLayers, int64_t capacity, int64_t kvHeadsPerRank, int64_t headDim,
          at::TensorOptions options, int64_t requests = 1);

  int64_t capacity() const { return capacity_; }
  int64_t requests() const { return storage_.size(2); }
  // One request's buffers: [capacity, kvHeadsPerRank, headDim] views.
  at::Tensor keys(int64_t layer, int64_t slot = 0) const { return keys_[layer][slot]; }
  at::Tensor values(int64_t layer, int64_t slot = 0) const { return values_[layer][slot]; }
  // Every request's buffers: [requests, capacity, kvHeadsPerRank, headDim].
  const at::Tensor& allKeys(int64_t layer) const { return keys_[layer]; }
  const at::Tensor& allValues(int64_t layer) const { return values_[layer]; }
  // Zeroes the first `requests` x `capacity` entries of every layer (one kernel), so that a
  // reused cache holds nothing of the generation before.
  void clear(int64_t requests, int64_t capacity);

 private:
  int64_t capacity_;
  at::Tensor storage_;  // [layers, 2, requests, capacity, kvHeadsPerRank, headDim]
  std::vector<at::Tensor> keys_;
  std::vector<at::Tensor> values_;
};

}  // namespace shardscope
