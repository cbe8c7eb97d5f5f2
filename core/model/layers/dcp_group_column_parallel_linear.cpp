#include "dcp_group_column_parallel_linear.h"

#include "../../error.h"

namespace shardscope {

TpRank dcpGroupShard(TpRank tp) {
  SS_ASSERT(tp.dcp >= 1 && tp.size % tp.dcp == 0, "dcp must divide tp");
  TpRank group = tp;
  group.rank = tp.rank / tp.dcp;
  group.size = tp.size / tp.dcp;
  return group;
}

DCPGroupColumnParallelLinear::DCPGroupColumnParallelLinear(std::string name, Module* parent,
                                                           int64_t inFeatures, int64_t outFeatures,
                                                           bool bias, TpRank tp)
    : ColumnParallelLinear(std::move(name), parent, inFeatures, outFeatures, bias,
                           dcpGroupShard(tp)) {
  replicas_ = tp.dcp;
  setPorts(ShardSpec::whole(), ShardSpec::split(ShardKind::DcpGroup, -1, tp.dcp));
}

}  // namespace shardscope
