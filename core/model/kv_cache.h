// KvCache: one request's keys and values for every layer on this rank, preallocated to the
// request's full length (prompt + max tokens) so decode steps write in place.
#pragma once

#include <ATen/ATen.h>

#include <vector>

namespace shardscope {

class KvCache {
 public:
  // Buffers are [capacity, kvHeadsPerRank, headDim] per layer.
  KvCache(int64_t numLayers, int64_t capacity, int64_t kvHeadsPerRank, int64_t headDim,
          at::TensorOptions options);

  int64_t capacity() const { return capacity_; }
  at::Tensor& keys(int64_t layer) { return keys_[layer]; }
  at::Tensor& values(int64_t layer) { return values_[layer]; }

 private:
  int64_t capacity_;
  std::vector<at::Tensor> keys_;
  std::vector<at::Tensor> values_;
};

}  // namespace shardscope
