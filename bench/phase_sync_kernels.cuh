// phase_sync_bench's device side: the six phases of a Qwen3-30B-A3B decode layer at batch 1 as
// GEMV-like streams, and the kernels that run them a phase a kernel, a layer a cooperative kernel,
// all layers in one (phase_sync_bench.cu says why and how they are timed). Included by
// phase_sync_bench.cu only.
#pragma once

#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "core/kernels/block_choice.cuh"

namespace phase_sync {

constexpr int kThreads = 256, kWarps = kThreads / 32, kPhases = 6, kLayers = 48;
constexpr int64_t kRound = 4 * 256;  // elements a warp covers in a round: 4 loads of 8 a lane

struct Phase {
  const __nv_bfloat16* w;  // rows x k, row-major
  int64_t rows, k;
  int blocks;  // blocks that take part (the attention-like phase: 32)
  // Where its rows are known: before the wait (its weights load first), after it (one dependent
  // read), or after the experts' choice ShardScope's one-token kernels make from the router's
  // logits (chooseInBlock, as gateUpOneTokenKernel calls it).
  enum class Rows { kEarly, kLate, kChosen } rows_known;
};

struct Layer {
  Phase phase[kPhases];
};

struct Args {
  const Layer* layers;     // device array of kLayers
  const __nv_bfloat16* x;  // the vector every phase dots with (as long as the widest row)
  float* dep;              // dep[l * kPhases + i]: phase i of layer l writes it, i + 1 reads it
  float* out;              // every row's result (so nothing is left out)
  unsigned* barrier;       // one counter a layer (layer), or dep-indexed counts (whole)
  const int* choice;       // 0, read after the wait by a late phase to address its rows
  const void* logits;      // 128 router logits (bf16) for a chosen phase
};

__device__ __forceinline__ int4 loadStreaming(const __nv_bfloat16* p) {
  return __ldcs(reinterpret_cast<const int4*>(p));
}

__device__ __forceinline__ float dot8(int4 w, int4 x, float acc) {
  const __nv_bfloat16* a = reinterpret_cast<const __nv_bfloat16*>(&w);
  const __nv_bfloat16* b = reinterpret_cast<const __nv_bfloat16*>(&x);
#pragma unroll
  for (int i = 0; i < 8; ++i) acc = __fmaf_rn(__bfloat162float(a[i]), __bfloat162float(b[i]), acc);
  return acc;
}

// A warp's first row and the loads of its first round, issued before the phase waits.
struct Preload {
  int64_t row;
  int4 w[4];
};

__device__ __forceinline__ Preload preload(const Phase& p, int block) {
  Preload pre;
  pre.row = block < p.blocks ? int64_t(block) * kWarps + threadIdx.x / 32 : p.rows;
  if (pre.row >= p.rows || p.rows_known != Phase::Rows::kEarly) return pre;
  const int64_t k0 = int64_t(threadIdx.x % 32) * 8;
#pragma unroll
  for (int u = 0; u < 4; ++u) pre.w[u] = loadStreaming(p.w + pre.row * p.k + k0 + u * 256);
  return pre;
}

// The phase's rows for this warp (its first in pre, then every warps-th): two rounds in flight.
__device__ __forceinline__ void compute(const Phase& p, Preload& pre, const Args& a,
                                        const float* depIn, float* depOut) {
  __shared__ shardscope::kernels::BlockChoice choice;
  int chosenShift = 0;
  if (p.rows_known == Phase::Rows::kChosen) {  // every thread of the block takes part
    shardscope::kernels::FusedMoeArgs f;
    f.dtype = shardscope::kernels::DType::BFloat16;
    f.select.logits = a.logits;
    f.select.experts = 128;
    f.topK = 8;
    shardscope::kernels::chooseInBlock<__nv_bfloat16, false>(f, choice);
    chosenShift = min(choice.chosen[(threadIdx.x / 32) % 8], 0);  // 0, unknown to the compiler
  }
  if (pre.row >= p.rows) return;
  const int lane = threadIdx.x % 32;
  const int64_t warps = int64_t(p.blocks) * kWarps, k0 = int64_t(lane) * 8;
  const float base = __ldcg(depIn);
  int64_t r = pre.row, k = k0;
  if (p.rows_known !=
      Phase::Rows::kEarly) {  // a dependent read or the choice, then the first round
    r += p.rows_known == Phase::Rows::kLate ? __ldcg(a.choice) : chosenShift;
#pragma unroll
    for (int u = 0; u < 4; ++u) pre.w[u] = loadStreaming(p.w + r * p.k + k0 + u * 256);
  }
  float acc = 0.f;
  for (;;) {
    int64_t nk = k + kRound, nr = r;
    if (nk >= p.k) {
      nk = k0;
      nr = r + warps;
    }
    const bool more = nr < p.rows;
    int4 ahead[4];
    if (more) {
#pragma unroll
      for (int u = 0; u < 4; ++u) ahead[u] = loadStreaming(p.w + nr * p.k + nk + u * 256);
    }
#pragma unroll
    for (int u = 0; u < 4; ++u)
      acc = dot8(pre.w[u], __ldg(reinterpret_cast<const int4*>(a.x + k + u * 256)), acc);
    if (nk == k0) {
      for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
      if (lane == 0) {
        a.out[r] = acc + base;
        if (r == 0) *depOut = acc * 1e-6f + base;
      }
      acc = 0.f;
    }
    if (!more) return;
#pragma unroll
    for (int u = 0; u < 4; ++u) pre.w[u] = ahead[u];
    r = nr;
    k = nk;
  }
}

__device__ __forceinline__ void waitForPreviousKernel() {
  asm volatile("griddepcontrol.wait;" ::: "memory");
}
__device__ __forceinline__ void allowNextKernel() {
  asm volatile("griddepcontrol.launch_dependents;");
}

// Every block of the grid arrives; none leaves before all have (the grid is co-resident: it is
// launched cooperatively). count rises by gridDim.x a barrier; target is the total to wait for.
__device__ __forceinline__ void gridBarrier(unsigned* count, unsigned target) {
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    atomicAdd(count, 1u);
    unsigned seen = 0;
    do {
      asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(seen) : "l"(count) : "memory");
    } while (seen < target);
  }
  __syncthreads();
}

// Phase i of a layer as its own kernel's work: its first weights loaded before the wait.
__device__ __forceinline__ void runPhase(const Args& a, int layer, int i) {
  const Phase& p = a.layers[layer].phase[i];
  Preload pre = preload(p, int(blockIdx.x));
  waitForPreviousKernel();
  allowNextKernel();
  const int d = layer * kPhases + i;
  compute(p, pre, a, d == 0 ? a.dep + kLayers * kPhases : a.dep + d - 1, a.dep + d);
}

__global__ void __launch_bounds__(kThreads, 2) phaseKernel(Args a, int layer, int i) {
  runPhase(a, layer, i);
}

// Phase i, then phase i + 1 in the same kernel by the blocks that finish phase i last: each block
// takes a ticket from done (one counter a layer and phase, zeroed before the graph) when its rows
// are written; the last t.blocks tickets load their first weights of phase i + 1, wait until
// every ticket is taken (only the stragglers of phase i are left by then) and run it. No block
// waits for one that has not started: the grid's other blocks have left their SMs by then.
__global__ void __launch_bounds__(kThreads, 2)
    phaseWithTailKernel(Args a, int layer, int i, unsigned* done) {
  runPhase(a, layer, i);
  const int d = layer * kPhases + i;
  const Phase& t = a.layers[layer].phase[i + 1];
  __shared__ unsigned ticket;
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    ticket = atomicAdd(done, 1u);
  }
  __syncthreads();
  const int slot = int(ticket) - (int(gridDim.x) - t.blocks);
  if (slot < 0) return;
  Preload tailPre = preload(t, slot);
  if (threadIdx.x == 0) {
    unsigned seen = 0;
    do {
      asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(seen) : "l"(done) : "memory");
    } while (seen < gridDim.x);
  }
  __syncthreads();
  compute(t, tailPre, a, a.dep + d, a.dep + d + 1);  // rows by the slot, as preload took them
}

// Phases of layers [first, last) with a grid barrier before every phase but the first.
__device__ __forceinline__ void layers(const Args& a, int first, int last, unsigned* count) {
  unsigned barriers = 0;
  for (int l = first; l < last; ++l) {
    for (int i = 0; i < kPhases; ++i) {
      const Phase& p = a.layers[l].phase[i];
      // A phase's blocks spread over the grid's: block b takes phase block b (phases have at
      // most as many blocks as the grid; the host checks).
      Preload pre = preload(p, int(blockIdx.x));
      if (l == first && i == 0) {
        waitForPreviousKernel();
        allowNextKernel();
      } else {
        gridBarrier(count, ++barriers * gridDim.x);
      }
      const int d = l * kPhases + i;
      compute(p, pre, a, d == 0 ? a.dep + kLayers * kPhases : a.dep + d - 1, a.dep + d);
    }
  }
}

__global__ void __launch_bounds__(kThreads, 2) layerKernel(Args a, int layer) {
  layers(a, layer, layer + 1, a.barrier + layer);
}

__global__ void __launch_bounds__(kThreads, 2) wholeKernel(Args a) {
  layers(a, 0, kLayers, a.barrier);
}

// The synchronisation alone: an empty phase a kernel, and a grid's barriers with no work.
__global__ void __launch_bounds__(kThreads, 2) emptyKernel() {
  waitForPreviousKernel();
  allowNextKernel();
}
__global__ void __launch_bounds__(kThreads, 2) emptyBarriers(unsigned* count, int n) {
  for (int b = 1; b <= n; ++b) gridBarrier(count, unsigned(b) * gridDim.x);
}

__global__ void __launch_bounds__(kThreads, 2) emptyGridSyncs(int n) {
  for (int b = 0; b < n; ++b) cooperative_groups::this_grid().sync();
}

// Sums every 16-byte word of [w, w + n): the bandwidth a plain read reaches.
__global__ void __launch_bounds__(kThreads) readAll(const int4* w, int64_t n, float* out) {
  float s = 0.f;
  for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * kThreads) {
    const int4 v = __ldcs(w + i);
    s += __int_as_float(v.x ^ v.y ^ v.z ^ v.w);
  }
  if (s == 1.2345f) *out = s;  // never true in practice; keeps the loads
}

__global__ void fill(__nv_bfloat16* w, int64_t n, uint32_t seed) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    w[i] = __float2bfloat16((float(h & 0xffff) / 65536.f - 0.5f) * 0.05f);
  }
}

}  // namespace phase_sync
