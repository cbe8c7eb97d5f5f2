// MLAAttention: DeepSeek-V2's multi-head latent attention over a latent KV cache (vLLM's
// `mla_attn`). Per token the cache holds the normalised latent (kv_a_layernorm's output,
// kv_lora_rank values) and the rotated rope key (qk_rope_head_dim values), not keys and values per
// head; keys and values are expanded from it with kv_b_proj's weights when attention needs them:
//   k_h = [latent W_kb,h | k_pe],  v_h = latent W_vb,h,
//   o_h = softmax(q_h k_h^T * scale) v_h,  scale = qk_head_dim^-0.5 *
//   yarn_mscale(mscale_all_dim)^2.
// The step's own keys and values are kv_b_proj's output as the step saw it (a trace's write to it
// reaches this step's attention; later steps expand the cached latent again). A decode step takes
// its positions, slots and span from the device (batch.decodeSlots), expanded or not, so that a
// CUDA graph segment recorded at one step serves the next (a layer a trace observes is replayed
// as segments cut at its ports).
// A decode step nobody observes (no port observer: a plain generation, or the layers a CUDA graph
// replays) attends in the latent space instead, as vLLM's MLA decode does: with
// kv_b_proj's rows split per head into W_UK (nope) and W_UV (v),
//   q_lat,h = q_nope,h W_UK,h,  s_h = [q_lat,h | q_pe,h] [latent | k_pe]^T * scale,
//   o_h = softmax(s_h) latent W_UV,h^T,
// the same sums regrouped, so a step reads the cached latent (kv_lora + rope per token) and never
// expands keys and values per head.
// Decode-context parallelism (TpRank::dcp > 1): the tokens are split across the dcp ranks of a
// group (token t on group rank t % dcp); each rank attends with all of the group's query heads over
// its tokens, and the partial results are combined exactly through their log-sum-exp, after which
// each rank keeps its own heads.
// Input q [T, groupHeads, qk_head_dim] (split by heads, replicated across the group); output
// [T, headsPerRank * v_head_dim] (split by heads), o_proj's input.
#pragma once

#include <string>

#include "../forward_batch.h"
#include "../model_config.h"
#include "../module.h"
#include "tp_rank.h"

namespace shardscope {

class MLAAttention : public Module {
 public:
  MLAAttention(std::string name, Module* parent, int64_t layer, const ModelConfig& c, TpRank tp);
  const char* kind() const override { return "MLAAttention"; }
  // q: [T, groupHeads, nope + rope] (rope part rotated), latent: [T, kv_lora] (normalised),
  // kPe: [T, rope] (rotated), kv: [T, headsPerRank * (nope + v)] (kv_b_proj's output on this
  // rank), kvB: [groupHeads * (nope + v), kv_lora] (the group's expansion weights)
  //   ->  [T, headsPerRank * v]. Writes the latent and rope key of the tokens this rank holds
  // into each span's cache. Visits input and output.
  at::Tensor forward(const at::Tensor& q, const at::Tensor& latent, const at::Tensor& kPe,
                     const at::Tensor& kv, const at::Tensor& kvB, const ForwardBatch& batch) const;

  // The latent-space decode: q, latent, kPe and kvB as forward's (no kv_b_proj output: nothing
  // is expanded). Needs batch.decodeSlots (one token per request in one cache).
  at::Tensor forwardAbsorbed(const at::Tensor& q, const at::Tensor& latent, const at::Tensor& kPe,
                             const at::Tensor& kvB, const ForwardBatch& batch) const;
  // Whether a step takes forwardAbsorbed: a decode step that no observer can see into (a trace
  // that reads or writes kv_b_proj, the expanded k/v or this module sees the expanded path).
  static bool absorbs(const ForwardBatch& batch) {
    return !batch.observer && batch.decodeSlots.defined();
  }

  int64_t layer() const { return layer_; }
  double scale() const { return scale_; }
  // Query heads a rank attends with: its own heads times dcp (its group's).
  int64_t groupHeads() const { return headsPerRank_ * tp_.dcp; }

 private:
  // One span's attention over the tokens this rank caches: out [n, groupHeads, v] and, under DCP,
  // lse [n, groupHeads] (-inf where the rank holds none of a query's keys).
  std::pair<at::Tensor, at::Tensor> attendSpan(const SequenceSpan& s, const at::Tensor& q,
                                               const at::Tensor& kvNew,
                                               const at::Tensor& kvB) const;
  void writeCache(const SequenceSpan& s, const at::Tensor& entries) const;
  // A decode step's entries [R, kv_lora + rope] into the shared cache, each at its request's
  // position on the rank that holds it (device-side, so CUDA graphs record it).
  void writeDecodeCache(const at::Tensor& entries, const ForwardBatch& batch) const;
  // Latent-space attention of a decode step: q [R, gh, nope + rope] -> out [R, gh, v] and, under
  // DCP, lse [R, gh].
  std::pair<at::Tensor, at::Tensor> attendLatent(const at::Tensor& q, const at::Tensor& kvB,
                                                 const ForwardBatch& batch) const;
  // A decode step's attention with keys and values expanded per head from the cached latent,
  // each request's own token from kvNew [R, gh * (nope + v)] (kv_b_proj's output): as
  // attendLatent's results, with nothing decided from host-side positions.
  std::pair<at::Tensor, at::Tensor> attendExpandedDecode(const at::Tensor& q,
                                                         const at::Tensor& kvNew,
                                                         const at::Tensor& kvB,
                                                         const ForwardBatch& batch) const;
  // The cache entries this rank holds of a decode step's span: [R, span / dcp, kv_lora + rope]
  // (local key j sits at position j * dcp + rank in the group).
  at::Tensor decodeEntries(const ForwardBatch& batch) const;
  // Scores [R, gh, keys] of a decode step: -inf where a key lies past its request's position;
  // then softmax (and under DCP the log-sum-exp) as attendSpan's.
  std::pair<at::Tensor, at::Tensor> decodeProbabilities(at::Tensor scores,
                                                        const ForwardBatch& batch) const;
  // This rank's heads of the group's result: [T, gh, v] (+ lse under DCP) -> [T, heads * v].
  at::Tensor finish(const at::Tensor& out, const at::Tensor& lse, const ForwardBatch& batch) const;
  // The group's heads of a per-rank, per-head tensor [T, headsPerRank * d] -> [T, groupHeads * d].
  at::Tensor groupColumns(const at::Tensor& x, const ForwardBatch& batch) const;
  // Combines the group's partial results exactly: [T, groupHeads, v] + lse -> this rank's heads.
  at::Tensor combine(const at::Tensor& out, const at::Tensor& lse, const ForwardBatch& batch) const;

  int64_t layer_, headsPerRank_, nope_, rope_, v_, kvLora_;
  double scale_;
  TpRank tp_;
};

}  // namespace shardscope
