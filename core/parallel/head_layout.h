// HeadLayout: where each attention head lives when q_proj, k_proj and v_proj are split by heads
// and fused per rank (vLLM's QKVParallelLinear): rank r holds [q_r | k_r | v_r], and when tp
// exceeds the KV heads each KV head is replicated on tp / n_kv consecutive ranks. The one place
// that does this rank arithmetic: the QKV layer loads its shard with it, its head accessors and
// the GUI's scripts find a head's columns in gathered values with it. No torch: ui/ uses it.
#pragma once

#include <cstdint>

namespace shardscope {

enum class HeadPart { Query, Key, Value };

// A range of columns (the last dimension).
struct HeadColumns {
  int64_t start = 0;
  int64_t size = 0;
};

class HeadLayout {
 public:
  HeadLayout() = default;
  HeadLayout(int64_t numHeads, int64_t numKvHeads, int64_t headDim, int tp);

  int64_t numHeads(HeadPart part) const { return part == HeadPart::Query ? numHeads_ : numKv_; }
  int64_t headDim() const { return headDim_; }
  int tp() const { return tp_; }
  int64_t qHeadsPerRank() const { return numHeads_ / tp_; }
  int64_t kvHeadsPerRank() const { return numKv_ >= tp_ ? numKv_ / tp_ : 1; }
  // Ranks holding each KV head (1 unless tp > n_kv).
  int kvReplicas() const { return tp_ > numKv_ ? int(tp_ / numKv_) : 1; }
  // The first KV head rank `rank` holds.
  int64_t firstKvHeadOf(int rank) const { return (rank / kvReplicas()) * kvHeadsPerRank(); }
  // Columns of one rank's fused qkv shard, and of the gathered one (the shards concatenated).
  int64_t qkvColumnsPerRank() const { return (qHeadsPerRank() + 2 * kvHeadsPerRank()) * headDim_; }
  int64_t gatheredQkvColumns() const { return qkvColumnsPerRank() * tp_; }
  bool contains(HeadPart part, int64_t head) const { return head >= 0 && head < numHeads(part); }

  // Head `head` of `part` in the gathered qkv_proj output; a replicated KV head is read from the
  // first rank holding it.
  HeadColumns qkvColumns(HeadPart part, int64_t head) const;
  // In the gathered rotary_emb output (q, k): query head `head` in q; in k, the copy of the KV head
  // that query head attends with as its own rank holds it (k keeps every rank's KV heads).
  HeadColumns rotaryQueryColumns(int64_t head) const { return {head * headDim_, headDim_}; }
  HeadColumns rotaryKeyColumnsFor(int64_t queryHead) const;

 private:
  int64_t numHeads_ = 1, numKv_ = 1, headDim_ = 1;
  int tp_ = 1;
};

}  // namespace shardscope
