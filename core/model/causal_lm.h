// CausalLM: the root of a model's module tree ("model") and its one forward. A family file builds
// the tree from layers/ and loads this rank's shards; the engine only sees this interface.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "forward_batch.h"
#include "layers/tp_rank.h"
#include "model_config.h"
#include "module.h"

namespace shardscope {

// What one pipeline stage hands the next: the residual stream after its last layer, as
// (hidden, residual), each [T, H] whole.
struct StageCarry {
  at::Tensor hidden, residual;
};

// A port that no single stage owns: every stage visits it (model.samples) or none does.
constexpr int kEveryStage = -1;

class CausalLM : public Module {
 public:
  using Module::Module;

  virtual const ModelConfig& config() const = 0;
  virtual int64_t kvHeadsPerRank() const = 0;
  // What the KV cache holds per token on this rank: keys and values of its KV heads by default.
  virtual KvCacheLayout kvCacheLayout() const { return {kvHeadsPerRank(), config().headDim}; }
  // This rank's stage of the forward. The first stage embeds `ids` ([T] int64 flattened over the
  // batch's spans); every stage runs its layers on `carry` and leaves their output there; the last
  // stage returns the final hidden states [T, H] (whole), the others an undefined tensor.
  virtual at::Tensor forwardStage(const at::Tensor& ids, StageCarry& carry,
                                  const ForwardBatch& batch) const = 0;
  // A single-stage model's forward: ids [T] -> final hidden states [T, H] (whole).
  at::Tensor forward(const at::Tensor& ids, const ForwardBatch& batch) const {
    StageCarry carry;
    return forwardStage(ids, carry, batch);
  }
  // hidden: [R, H]  ->  logits [R, V] over the whole vocabulary (every rank of the last stage).
  virtual at::Tensor logits(const at::Tensor& hidden, const ForwardBatch& batch) const = 0;
  // This rank's pipeline stage, and the stage that visits port `role` of `m` (kEveryStage: every
  // stage or none). The module tree is whole on every stage; only the owner holds the weights.
  virtual const StageRank& stage() const = 0;
  virtual int portStage(const Module& m, PortRole role) const = 0;
  // The stage that holds `m` (its weights, both its ports), or kEveryStage when it spans stages.
  int moduleStage(const Module& m) const {
    const int in = portStage(m, PortRole::Input);
    return in == portStage(m, PortRole::Output) ? in : kEveryStage;
  }
  // The step ports "model.logits" and "model.samples".
  virtual const Module& logitsPort() const = 0;
  virtual const Module& samplesPort() const = 0;
  // Whether a decode step's layers may be captured as CUDA graphs (not when routing decides on
  // the host which experts run).
  virtual bool graphCapturable() const { return true; }

  // Every module of the tree by its path ("model.model.layers[3].mlp"), built once.
  const std::map<std::string, const Module*>& modulesByPath() const;
  // A port's number, the same on every rank (the tree is), and back: how stages name the port
  // whose value they share. -1 for a module outside the tree.
  int64_t portId(const Module& m, PortRole role) const;
  std::pair<const Module*, PortRole> portAt(int64_t id) const;

 private:
  mutable std::once_flag indexOnce_;
  mutable std::map<std::string, const Module*> index_;
  mutable std::vector<const Module*> order_;  // by number
  mutable std::unordered_map<const Module*, int64_t> numbers_;
};

// Builds the family named by config.family for this rank and loads its shards from ctx.source.
std::unique_ptr<CausalLM> buildCausalLM(const ModelConfig& config, LoadContext& ctx);

}  // namespace shardscope
