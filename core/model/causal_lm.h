// CausalLM: the root of a model's module tree ("model") and its one forward. A family file builds
// the tree from layers/ and loads this rank's shards; the engine only sees this interface.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "forward_batch.h"
#include "layers/tp_rank.h"
#include "model_config.h"
#include "module.h"

namespace shardscope {

class CausalLM : public Module {
 public:
  using Module::Module;

  virtual const ModelConfig& config() const = 0;
  virtual int64_t kvHeadsPerRank() const = 0;
  // What the KV cache holds per token on this rank: keys and values of its KV heads by default.
  virtual KvCacheLayout kvCacheLayout() const { return {kvHeadsPerRank(), config().headDim}; }
  // ids: [T] int64 flattened over the batch's spans  ->  final hidden states [T, H] (whole).
  virtual at::Tensor forward(const at::Tensor& ids, const ForwardBatch& batch) const = 0;
  // hidden: [R, H]  ->  logits [R, V] over the whole vocabulary (every rank gets them).
  virtual at::Tensor logits(const at::Tensor& hidden, const ForwardBatch& batch) const = 0;
  // The step ports "model.logits" and "model.samples".
  virtual const Module& logitsPort() const = 0;
  virtual const Module& samplesPort() const = 0;
  // Whether a decode step's layers may be captured as CUDA graphs (not when routing decides on
  // the host which experts run).
  virtual bool graphCapturable() const { return true; }

  // Every module of the tree by its path ("model.model.layers[3].mlp"), built once.
  const std::map<std::string, const Module*>& modulesByPath() const;

 private:
  mutable std::once_flag indexOnce_;
  mutable std::map<std::string, const Module*> index_;
};

// Builds the family named by config.family for this rank and loads its shards from ctx.source.
std::unique_ptr<CausalLM> buildCausalLM(const ModelConfig& config, LoadContext& ctx);

}  // namespace shardscope
