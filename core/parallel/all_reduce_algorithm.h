// Which implementation an NcclGroup's allReduceSum uses for small tensors.
#pragma once

namespace shardscope {

// Auto: the peer-memory all-reduce when every pair of GPUs has peer access, NCCL otherwise.
// Peer: core/parallel/peer_all_reduce.h (an error where it cannot work). Nccl: NCCL alone.
// NcclSymmetric: NCCL on buffers registered as symmetric windows (NCCL 2.27+).
// SHARDSCOPE_ALL_REDUCE picks one (core/runtime_switches.h).
enum class AllReduceAlgorithm { Auto, Peer, Nccl, NcclSymmetric };

// The algorithms' names, in the enum's order (SHARDSCOPE_ALL_REDUCE's values).
inline constexpr const char* kAllReduceAlgorithmNames[] = {"auto", "peer", "nccl",
                                                           "nccl-symmetric"};

inline const char* toString(AllReduceAlgorithm a) {
  return kAllReduceAlgorithmNames[int(a)];
}

}  // namespace shardscope
