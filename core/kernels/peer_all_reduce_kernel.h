// The one-shot all-reduce kernel over peer memory (CUDA builds only; see
// core/parallel/peer_all_reduce.h for who owns the buffers). Plain pointers in, as kernels.h.
//
// Each rank copies its tensor into its own staging buffer, the ranks meet at a flag barrier (per
// block: flags written with release and read with acquire at system scope, so the staged bytes
// are visible to the peers that read them), every rank sums all staging buffers in rank order in
// fp32 and rounds once (so every rank holds the same bits, and at two ranks the same bits as
// NCCL's sum), and the ranks meet again before a staging buffer may be overwritten. Flags count
// up per barrier in device memory, so a recorded CUDA graph replays it as often as it likes. A
// spinning block returns when the host-mapped abort flag is set: a rank that never arrives cannot
// hang the others once the group is aborted.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels.h"

namespace shardscope::kernels {

constexpr int kPeerMaxRanks = 8;
constexpr int kPeerMaxBlocks = 64;
constexpr int kPeerThreads = 512;

// One per rank, in that rank's device memory, zeroed once.
struct PeerSignal {
  uint32_t flags[2][kPeerMaxBlocks][kPeerMaxRanks];  // [barrier][block][from rank]
  uint32_t counter[kPeerMaxBlocks][kPeerMaxRanks];   // this rank's barriers so far
};

struct PeerAllReduceArgs {
  DType dtype = DType::Float;
  void* data = nullptr;  // in place, contiguous, count * element bytes a multiple of 16
  int64_t count = 0;
  int rank = 0, ranks = 0;
  void* staging[kPeerMaxRanks] = {};
  PeerSignal* signals[kPeerMaxRanks] = {};
  const volatile int* abortFlag = nullptr;  // host-mapped
};
cudaError_t peerAllReduce(const PeerAllReduceArgs& a, cudaStream_t stream);

}  // namespace shardscope::kernels
