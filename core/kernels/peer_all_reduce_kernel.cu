#include "kernel_math.cuh"
#include "peer_all_reduce_kernel.h"

namespace shardscope::kernels {
namespace {

__device__ __forceinline__ void storeRelease(uint32_t* p, uint32_t v) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ uint32_t loadAcquire(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// Block blockIdx.x of every rank meets here: thread r (< ranks) tells rank r that this rank
// arrived and waits until rank r did. Counters only grow, so a rank already at its next barrier
// (a larger value) also counts as arrived. False when the group was aborted while waiting.
__device__ bool meet(const PeerAllReduceArgs& a, int barrier) {
  __shared__ int aborted;
  if (threadIdx.x == 0) aborted = 0;
  __syncthreads();
  if (threadIdx.x < a.ranks) {
    PeerSignal* self = a.signals[a.rank];
    const uint32_t value = ++self->counter[blockIdx.x][threadIdx.x];
    storeRelease(&a.signals[threadIdx.x]->flags[barrier][blockIdx.x][a.rank], value);
    const uint32_t* arrived = &self->flags[barrier][blockIdx.x][threadIdx.x];
    for (uint32_t spins = 1; int32_t(loadAcquire(arrived) - value) < 0; ++spins) {
      if (spins % 1024 == 0 && *a.abortFlag) {
        aborted = 1;
        break;
      }
    }
  }
  __syncthreads();
  return aborted == 0;
}

template <typename T>
__global__ void peerAllReduceKernel(PeerAllReduceArgs a) {
  waitForPreviousKernel();
  constexpr int kVec = 16 / sizeof(T);
  using V = Vec<T, kVec>;
  const int64_t vectors = a.count / kVec;
  const int64_t first = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  T* data = static_cast<T*>(a.data);
  T* mine = static_cast<T*>(a.staging[a.rank]);
  // A block stages exactly the vectors it later sums, so its barrier covers what it reads.
  for (int64_t i = first; i < vectors; i += stride)
    store<T, kVec>(mine + i * kVec, load<T, kVec>(data + i * kVec));
  if (!meet(a, 0)) return;
  for (int64_t i = first; i < vectors; i += stride) {
    float sum[kVec];
    const V v0 = load<T, kVec>(static_cast<const T*>(a.staging[0]) + i * kVec);
#pragma unroll
    for (int j = 0; j < kVec; ++j) sum[j] = toFloat(v0.v[j]);
    for (int r = 1; r < a.ranks; ++r) {
      const V v = load<T, kVec>(static_cast<const T*>(a.staging[r]) + i * kVec);
#pragma unroll
      for (int j = 0; j < kVec; ++j) sum[j] = __fadd_rn(sum[j], toFloat(v.v[j]));
    }
    V out;
#pragma unroll
    for (int j = 0; j < kVec; ++j) out.v[j] = fromFloat<T>(sum[j]);
    store<T, kVec>(data + i * kVec, out);
  }
  meet(a, 1);  // no rank overwrites its staging buffer while a peer still reads it
  allowNextKernel();
}

}  // namespace

cudaError_t peerAllReduce(const PeerAllReduceArgs& a, cudaStream_t stream) {
  if (a.count == 0) return cudaSuccess;
  if (a.ranks < 1 || a.ranks > kPeerMaxRanks || !a.abortFlag) return cudaErrorInvalidValue;
  return dispatch(a.dtype, [&](auto t) {
    using T = decltype(t);
    constexpr int64_t kVec = 16 / sizeof(T);
    if (a.count % kVec != 0 || !aligned(a.data, 16)) return cudaErrorInvalidValue;
    const int64_t vectors = a.count / kVec;
    const int64_t blocks =
        std::min<int64_t>((vectors + kPeerThreads - 1) / kPeerThreads, kPeerMaxBlocks);
    return launchKernel(peerAllReduceKernel<T>, dim3(unsigned(blocks)), dim3(kPeerThreads), 0,
                        stream, a);
  });
}

}  // namespace shardscope::kernels
