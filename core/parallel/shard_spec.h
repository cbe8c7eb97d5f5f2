// ShardSpec: how a value is laid out across tensor-parallel ranks (SPEC section 2), as data that
// modules declare for their ports and parameters. The gathered ("whole") value a trace reads, the
// write-back into this rank's shard and the whole shape are functions of it alone, so the trace
// layer and the port probe never need to know which layer produced a value.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace shardscope {

class ProcessGroup;

// The layout's name as the module tree and `shardscope-cli inspect` show it.
enum class ShardKind {
  Whole,        // every rank holds the whole value
  Column,       // split along a dimension (the last by default), gathered in rank order
  FusedColumn,  // several column outputs fused per rank (qkv, gate_up): rank shards concatenated
  RowInput,     // input of a row-parallel layer: split along the last dimension
  Head,         // split by attention heads (dimension 1 of [T, heads, d], or last of [T, heads*d])
  PartialSum,   // each rank holds a partial sum; reading all-reduces
  Vocab,        // split along the (padded) vocabulary
  // Column split into tp / dcp shards, each held by the `replicas` (= dcp) consecutive ranks of a
  // decode-context-parallel group (vLLM's DCPGroupColumnParallelLinear): a read gathers the
  // shards once, dropping the group replicas; a write lands on every replica.
  DcpGroup,
};

const char* shardKindName(ShardKind k);

struct ShardSpec {
  ShardKind kind = ShardKind::Whole;
  int64_t dim = -1;  // the dimension split kinds are cut along; negative counts from the end
  // Consecutive ranks holding the same shard (KV heads when tp > n_kv): gathered once. Fused
  // shards are concatenated as they are, so each rank's [q | k | v] stays intact.
  int replicas = 1;
  // Fused kinds: the sizes of the parts in one rank's shard along `dim` ([q, k, v] per rank).
  std::vector<int64_t> parts;
  // Padded kinds: the size along `dim` once gathered and trimmed (-1: nothing to trim).
  int64_t wholeSize = -1;

  ShardSpec() = default;
  // Implicit, so a port can be declared as {"", ShardKind::PartialSum}.
  ShardSpec(ShardKind k, int64_t splitDim = -1, int replicaCount = 1)  // NOLINT
      : kind(k), dim(splitDim), replicas(replicaCount) {}

  static ShardSpec whole() { return {}; }
  static ShardSpec split(ShardKind kind, int64_t dim = -1, int replicas = 1);
  static ShardSpec fused(std::vector<int64_t> partSizes, int64_t dim = -1);
  static ShardSpec partialSum() { return {ShardKind::PartialSum}; }
  // Split along `dim`, each rank's shard padded so that the gathered value has extra rows past
  // `wholeSize` (the vocabulary padded to a multiple of 64).
  static ShardSpec padded(ShardKind kind, int64_t dim, int64_t wholeSize);

  // Whether ranks hold different slices that a read concatenates.
  bool isSplit() const;
  const char* name() const { return shardKindName(kind); }
};

// The whole value of `local` (this rank's shard) on every rank: the shards concatenated in rank
// order (replicas once, padding trimmed) or the all-reduced sum. Whole values and a single rank's
// split value are returned as `local` itself, so writes to them land in the model directly.
// Every rank must call it with the same spec (it runs collectives).
at::Tensor gather(const at::Tensor& local, const ShardSpec& spec, ProcessGroup& group);

// Writes `whole` (as returned by gather and then edited) back into this rank's shard: its slice
// for split kinds (padding left as it was), whole / group size for partial sums (the block's own
// reduce then sums it exactly once). A no-op where gather returned `local` itself.
void scatterBack(at::Tensor& local, const at::Tensor& whole, const ShardSpec& spec,
                 ProcessGroup& group);

// The shape gather returns for a shard of shape `shardShape` at tensor-parallel size `tp` (empty
// stays empty: a None item).
std::vector<int64_t> wholeShape(std::vector<int64_t> shardShape, const ShardSpec& spec, int tp);

}  // namespace shardscope
