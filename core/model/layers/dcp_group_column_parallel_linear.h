// DCPGroupColumnParallelLinear (vLLM's name, with VLLM_DCP_Q_REPLICATE=1): a column-parallel
// linear layer under decode-context parallelism. Y = X A^T with A of shape [out, in]; the output
// dimension is split into tp / dcp shards, and the dcp consecutive ranks of a decode-context group
// (ranks g*dcp .. g*dcp + dcp - 1) all hold shard g. DeepSeek's query projection takes this form:
// the ranks of a group attend with the group's query heads over their part of the cached tokens,
// so each needs all of them. Output (out_local, None), out_local [T, out * dcp / tp]; a read
// gathers the shards once (the group replicas dropped), a write lands on every replica.
#pragma once

#include <string>

#include "column_parallel_linear.h"

namespace shardscope {

class DCPGroupColumnParallelLinear : public ColumnParallelLinear {
 public:
  // `tp.dcp` must divide `tp.size` (ModelConfig::checkTensorParallel refuses other sizes).
  DCPGroupColumnParallelLinear(std::string name, Module* parent, int64_t inFeatures,
                               int64_t outFeatures, bool bias, TpRank tp);
  const char* kind() const override { return "DCPGroupColumnParallelLinear"; }
};

// The shard a rank of a decode-context group loads: its group's, one of tp / dcp.
TpRank dcpGroupShard(TpRank tp);

}  // namespace shardscope
