// Which implementation an NcclGroup's allReduceSum uses for small tensors.
#pragma once

namespace shardscope {

// Auto: the peer-memory all-reduce when every pair of GPUs has peer access, NCCL otherwise.
// Peer: core/parallel/peer_all_reduce.h (an error where it cannot work). Nccl: NCCL alone.
// NcclSymmetric: NCCL on buffers registered as symmetric windows (NCCL 2.27+).
enum class AllReduceAlgorithm { Auto, Peer, Nccl, NcclSymmetric };

// Parses SHARDSCOPE_ALL_REDUCE (auto, peer, nccl, nccl-symmetric; Auto when unset); an unknown
// value throws, listing the valid ones.
AllReduceAlgorithm allReduceAlgorithmFromEnvironment();
const char* toString(AllReduceAlgorithm a);

}  // namespace shardscope
