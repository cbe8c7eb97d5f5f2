// Vocabulary-parallel layers (vLLM's names). The vocabulary V is padded to a multiple of 64, then
// split evenly: rank r owns token ids [r*Vp/tp, (r+1)*Vp/tp); padding rows are zero.
//   VocabParallelEmbedding  looks up the ids this rank owns, zeros the rest, all-reduces: [T, H].
//   ParallelLMHead          holds the output embedding shard [Vp/tp, H]; never called itself.
//   LogitsProcessor         h @ lm_head^T per rank, all-gathers the vocabulary, trims padding.
#pragma once

#include <string>

#include "../forward_batch.h"
#include "../module.h"
#include "tp_rank.h"

namespace shardscope {

constexpr int64_t kVocabPadding = 64;
int64_t paddedVocab(int64_t vocab);

class VocabParallelEmbedding : public Module {
 public:
  VocabParallelEmbedding(std::string name, Module* parent, int64_t vocab, int64_t hidden,
                         TpRank tp);
  const char* kind() const override { return "VocabParallelEmbedding"; }
  void load(LoadContext& ctx, const std::string& hfName);
  // ids: [T] int64  ->  [T, H] whole.
  at::Tensor forward(const at::Tensor& ids, const ForwardBatch& batch) const;
  const at::Tensor& weight() const { return weight_; }

 protected:
  at::Tensor loadShard(LoadContext& ctx, const std::string& hfName);

  int64_t vocab_, hidden_, perRank_;
  TpRank tp_;
  at::Tensor weight_;  // [Vp/tp, H]
};

class ParallelLMHead : public VocabParallelEmbedding {
 public:
  using VocabParallelEmbedding::VocabParallelEmbedding;
  const char* kind() const override { return "ParallelLMHead"; }
  std::string neverVisitedReason() const override {
    return "lm_head is never called: read model.logits or use "
           "model.logits_processor(model.lm_head, h)";
  }
  // Tied embeddings share the input embedding's shard.
  void tie(const VocabParallelEmbedding& embedding);
};

class LogitsProcessor : public Module {
 public:
  LogitsProcessor(std::string name, Module* parent, int64_t vocab);
  const char* kind() const override { return "LogitsProcessor"; }
  // hidden: [R, H] whole  ->  [R, V] whole logits.
  at::Tensor forward(const ParallelLMHead& head, const at::Tensor& hidden,
                     const ForwardBatch& batch) const;
  // logits_processor(lm_head, h) from a trace, h [R, H] or [H] whole.
  bool callableWithWhole() const override { return true; }
  std::vector<at::Tensor> callWhole(const ModuleCall& call) const override;
  bool callRowWise() const override { return true; }

 private:
  int64_t vocab_;
};

}  // namespace shardscope
