#include <algorithm>
#include <optional>

#include "block_choice.cuh"
#include "bulk_ring.cuh"
#include "core/runtime_switches.h"
#include "device_limits.cuh"
#include "fused_moe_bulk.cuh"

// Why: the register kernels (fused_moe_one_token_kernel.cu) hold 12 loads a lane in flight, then
// multiply; every warp of every SM asked for its next round at about the same time and waited for
// it together, so the memory idled between rounds (gate_up took 18.6 us a layer for 11.8 us of
// bytes). Here one thread of a block keeps a ring of shared-memory slots filled with bulk copies
// (BulkRing), a consumer warp frees its slot as soon as it has read it, and the registers hold no
// loads. One block an SM: each streams an even share. Each lane adds its elements as dotRows does
// (increasing k, then the butterfly), and down combines as the register kernel does, so the bits
// are the same.

namespace shardscope::kernels {
namespace {

constexpr int kBulkWarps = 8;  // consumers; warp kBulkWarps issues the copies
constexpr int kBulkThreads = (kBulkWarps + 1) * 32;
constexpr int kBulkMaxSlots = 32;  // mbarrier pairs in static shared memory
// Slots' bytes a block: both kernels' blocks fit on one SM (228 KB) with their static shared
// memory, so down's blocks start, choose and fill their rings while gate_up streams (Qwen3-30B-A3B
// in bf16: gate_up 16 slots of 8 KB, down 8 of 6 KB).
constexpr size_t kGateUpRingBytes = 128 * 1024;
constexpr size_t kDownRingBytes = 64 * 1024;
constexpr int kBulkDownRows = 4;  // output rows a unit of down (their weights are contiguous)

__host__ __device__ constexpr size_t roundUp(size_t bytes, size_t to) {
  return (bytes + to - 1) / to * to;
}

// Local choices of the block's choice: how many, and the n-th one's index j.
struct LocalChoices {
  const BlockChoice& c;
  int64_t firstExpert, localExperts;
  int topK;
  __device__ int64_t expertOf(int j) const { return int64_t(c.chosen[j]) - firstExpert; }
  __device__ bool isLocal(int j) const { return expertOf(j) >= 0 && expertOf(j) < localExperts; }
  __device__ int count() const {
    int n = 0;
    for (int j = 0; j < topK; ++j) n += isLocal(j);
    return n;
  }
  __device__ int nth(int64_t n) const {
    int seen = -1, j = 0;
    for (; j < topK; ++j) {
      seen += isLocal(j);
      if (seen == n) break;
    }
    return j;
  }
};

// A block's units as (outer, inner) pairs, inner counting to `inners` before outer moves on,
// walked in steps without dividing again (the producer and each consumer walk their own).
struct UnitCursor {
  int64_t outer, inner, inners;
  __device__ UnitCursor(int64_t unit, int64_t inners_)
      : outer(unit / inners_), inner(unit % inners_), inners(inners_) {}
  __device__ void advance(int64_t step) {
    inner += step;
    while (inner >= inners) {
      inner -= inners;
      ++outer;
    }
  }
};

// h[j, i] = swiGlu(x . G_e[i], x . U_e[i]). Units are (local choice n, intermediate row i) in
// that order, split evenly over the blocks; warp w takes the block's units w, w + kBulkWarps, ...
// A slot holds a unit's gate row then its up row. Dynamic shared memory: x, then the slots.
template <typename T>
__global__ void __launch_bounds__(kBulkThreads, 1) gateUpBulkKernel(FusedMoeArgs a, int slots) {
  constexpr int VEC = 16 / sizeof(T);
  constexpr int64_t kChunk = 32 * VEC;
  __shared__ BlockChoice choice;
  __shared__ uint64_t barriers[2 * kBulkMaxSlots];
  extern __shared__ __align__(128) unsigned char shared[];
  const int64_t hidden = a.hidden, inter = a.inter;
  const unsigned rowBytes = unsigned(hidden * int64_t(sizeof(T)));
  T* xs = reinterpret_cast<T*>(shared);
  const BulkRing ring(shared + roundUp(rowBytes, 128), barriers, slots, 2 * rowBytes);
  if (threadIdx.x == 0) ring.init();
  waitForPreviousKernel();  // the logits and x
  allowNextKernel();
  const T* x = static_cast<const T*>(a.x);
  for (int64_t k = int64_t(threadIdx.x) * VEC; k < hidden; k += int64_t(blockDim.x) * VEC)
    store<T, VEC>(xs + k, load<T, VEC>(x + k));
  chooseInBlock<T, false>(a, choice);  // its barriers publish the ring's barriers and x
  const LocalChoices local{choice, a.firstExpert, a.localExperts, int(a.topK)};
  const int64_t units = local.count() * inter, blocks = gridDim.x;
  const int64_t u0 = units * blockIdx.x / blocks, count = units * (blockIdx.x + 1) / blocks - u0;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  // Unit u0 + k: local choice n = outer (choice j) and intermediate row i = inner.
  const int step = warp == kBulkWarps ? 1 : kBulkWarps;
  UnitCursor unit(u0 + (warp == kBulkWarps ? 0 : warp), inter);
  int64_t n = unit.outer;
  int j = local.nth(n);
  const auto next = [&] {
    unit.advance(step);
    if (unit.outer != n) j = local.nth(n = unit.outer);
  };
  if (warp == kBulkWarps) {
    if (lane != 0) return;
    for (int64_t k = 0; k < count; ++k, next()) {
      const int64_t i = unit.inner;
      const T* gate = static_cast<const T*>(a.w13) + (local.expertOf(j) * 2 * inter + i) * hidden;
      ring.beginFill(k, 2 * rowBytes);
      ring.copy(k, 0, gate, rowBytes);
      ring.copy(k, rowBytes, gate + inter * hidden, rowBytes);
    }
    return;
  }
  for (int64_t k = warp; k < count; k += kBulkWarps, next()) {
    const int64_t i = unit.inner;
    ring.waitFull(k);
    const T* gate = reinterpret_cast<const T*>(ring.slot(k));
    const T* up = gate + hidden;
    float accGate = 0.f, accUp = 0.f;
    for (int64_t e = int64_t(lane) * VEC; e < hidden; e += kChunk) {
      const Vec<T, VEC> xv = load<T, VEC>(xs + e), gv = load<T, VEC>(gate + e),
                        uv = load<T, VEC>(up + e);
#pragma unroll
      for (int v = 0; v < VEC; ++v) {
        accGate = __fmaf_rn(toFloat(gv.v[v]), toFloat(xv.v[v]), accGate);
        accUp = __fmaf_rn(toFloat(uv.v[v]), toFloat(xv.v[v]), accUp);
      }
    }
    __syncwarp();
    if (lane == 0) ring.release(k);
    for (int o = 16; o > 0; o >>= 1) {
      accGate += __shfl_xor_sync(kFull, accGate, o);
      accUp += __shfl_xor_sync(kFull, accUp, o);
    }
    if (lane == 0) static_cast<T*>(a.h)[j * inter + i] = swiGlu<T>(accGate, accUp);
  }
}

// y[o] = the local choices' round(round(h_j . D_e[o]) * weight_j), added in increasing expert
// order. The block takes an even share of the row groups (kBulkDownRows rows, contiguous in w2);
// units are (row group m of the block, local choice n) in that order, a slot holds one unit's rows.
// The choice and the copies come before the wait on gate_up (neither depends on h). Dynamic
// shared memory: the slots, then outs [row groups of a block][kMaxChoices][kBulkDownRows].
template <typename T>
__global__ void __launch_bounds__(kBulkThreads, 1) downBulkKernel(FusedMoeArgs a, int slots) {
  constexpr int VEC = 16 / sizeof(T);
  constexpr int64_t kChunk = 32 * VEC;
  constexpr int R = kBulkDownRows;
  __shared__ BlockChoice choice;
  __shared__ uint64_t barriers[2 * kBulkMaxSlots];
  extern __shared__ __align__(128) unsigned char shared[];
  const int64_t hidden = a.hidden, inter = a.inter;
  const unsigned rowBytes = unsigned(inter * int64_t(sizeof(T)));
  const BulkRing ring(shared, barriers, slots, R * rowBytes);
  float* outs = reinterpret_cast<float*>(shared + size_t(slots) * R * rowBytes);
  if (threadIdx.x == 0) ring.init();
  chooseInBlock<T, true>(a, choice);  // its barriers publish the ring's barriers
  const LocalChoices local{choice, a.firstExpert, a.localExperts, int(a.topK)};
  const int64_t groups = (hidden + R - 1) / R, blocks = gridDim.x;
  const int64_t g0 = groups * blockIdx.x / blocks,
                myGroups = groups * (blockIdx.x + 1) / blocks - g0;
  const int n = local.count();
  const int64_t count = myGroups * n;
  const auto rowsOf = [&](int64_t m) { return int(min(int64_t(R), hidden - (g0 + m) * R)); };
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  // Unit k: row group m = outer of the block and local choice inner (max: no division by a zero
  // count, when there are no units).
  UnitCursor unit(warp == kBulkWarps ? 0 : warp, max(n, 1));
  if (warp == kBulkWarps) {
    if (lane != 0) return;
    for (int64_t k = 0; k < count; ++k, unit.advance(1)) {
      const int64_t m = unit.outer;
      const int j = local.nth(unit.inner);
      const T* rows =
          static_cast<const T*>(a.w2) + (local.expertOf(j) * hidden + (g0 + m) * R) * inter;
      const unsigned bytes = unsigned(rowsOf(m)) * rowBytes;
      ring.beginFill(k, bytes);
      ring.copy(k, 0, rows, bytes);
    }
    return;
  }
  waitForPreviousKernel();  // h
  allowNextKernel();
  for (int64_t k = warp; k < count; k += kBulkWarps, unit.advance(kBulkWarps)) {
    const int64_t m = unit.outer;
    const int j = local.nth(unit.inner), rows = rowsOf(m);
    const T* hj = static_cast<const T*>(a.h) + j * inter;
    const float wj = choice.weight[j];
    ring.waitFull(k);
    const T* w = reinterpret_cast<const T*>(ring.slot(k));
    float acc[R] = {};
    for (int64_t e = int64_t(lane) * VEC; e < inter; e += kChunk) {
      const Vec<T, VEC> xv = load<T, VEC>(hj + e);
#pragma unroll
      for (int r = 0; r < R; ++r) {
        if (r >= rows) break;
        const Vec<T, VEC> wv = load<T, VEC>(w + r * inter + e);
#pragma unroll
        for (int v = 0; v < VEC; ++v)
          acc[r] = __fmaf_rn(toFloat(wv.v[v]), toFloat(xv.v[v]), acc[r]);
      }
    }
    __syncwarp();
    if (lane == 0) ring.release(k);
#pragma unroll
    for (int r = 0; r < R; ++r) {
      for (int o = 16; o > 0; o >>= 1) acc[r] += __shfl_xor_sync(kFull, acc[r], o);
    }
    if (lane == 0) {
#pragma unroll
      for (int r = 0; r < R; ++r) {
        if (r < rows)
          outs[(m * kMaxChoices + j) * R + r] =
              toFloat(fromFloat<T>(__fmul_rn(toFloat(fromFloat<T>(acc[r])), wj)));
      }
    }
  }
  asm volatile("bar.sync 1, %0;" ::"r"(kBulkWarps * 32) : "memory");  // the consumers' outs
  const int64_t row = threadIdx.x;
  if (row >= myGroups * R || g0 * R + row >= hidden) return;
  const int64_t m = row / R, r = row % R;
  float y = 0.f;
  for (int c = 0; c < int(a.topK); ++c) {
    const int j = choice.byExpert[c];
    if (choice.expert[j] >= 0) y = addRounded<T>(y, outs[(m * kMaxChoices + j) * R + r]);
  }
  static_cast<T*>(a.y)[g0 * R + row] = fromFloat<T>(y);
}

// How a bulk kernel runs: one block an SM, the ring's slots and the dynamic shared memory.
struct BulkPlan {
  int blocks = 0, slots = 0;
  size_t shared = 0;
};

// Slots of slotBytes within ringBytes, a multiple of kBulkWarps: warp w then consumes every use
// of the slots s = w (mod kBulkWarps), each slot's uses in order. (A warp that waited for a slot's
// use k while its use k - slots had not landed would see the barrier one phase behind, whose
// parity try_wait takes for done.) `other` bytes of dynamic shared memory come before or after
// the slots. None (blocks 0) before sm_90, when fewer than kBulkWarps slots fit, or when the block
// would need more shared memory than the device allows.
template <typename Kernel>
BulkPlan ringPlan(Kernel kernel, int64_t slotBytes, size_t ringBytes, size_t other) {
  if (slotBytes <= 0) return {};
  const int64_t fit = std::min<int64_t>(kBulkMaxSlots, int64_t(ringBytes) / slotBytes);
  const int64_t slots = fit / kBulkWarps * kBulkWarps;
  const DeviceLimits d = currentDeviceLimits();
  cudaFuncAttributes attributes{};
  if (slots < kBulkWarps || d.major < 9 ||
      cudaFuncGetAttributes(&attributes, kernel) != cudaSuccess)
    return {};
  const size_t shared = size_t(slots * slotBytes) + other;
  if (shared + attributes.sharedSizeBytes > size_t(d.sharedOptin)) return {};
  return {d.sms, int(slots), shared};
}

template <typename T>
BulkPlan gateUpPlan(const FusedMoeArgs& a) {
  const int64_t rowBytes = a.hidden * int64_t(sizeof(T));
  if (rowBytes % 16 != 0 || !aligned(a.w13, 16) || !aligned(a.x, 16)) return {};
  return ringPlan(gateUpBulkKernel<T>, 2 * rowBytes, kGateUpRingBytes,
                  roundUp(size_t(rowBytes), 128));  // x
}

template <typename T>
BulkPlan downPlan(const FusedMoeArgs& a) {
  const int64_t rowBytes = a.inter * int64_t(sizeof(T));
  if (rowBytes % 16 != 0 || !aligned(a.w2, 16)) return {};
  const int64_t sms = currentDeviceLimits().sms;
  if (sms <= 0) return {};
  const int64_t groups = (a.hidden + kBulkDownRows - 1) / kBulkDownRows;
  const int64_t perBlock = (groups + sms - 1) / sms;          // outs' row groups
  if (perBlock * kBulkDownRows > kBulkWarps * 32) return {};  // a consumer thread a row
  return ringPlan(downBulkKernel<T>, kBulkDownRows * rowBytes, kDownRingBytes,
                  size_t(perBlock * kMaxChoices * kBulkDownRows) * sizeof(float));
}

// Both kernels prefer the largest shared-memory carveout: with a smaller one, down's blocks would
// not fit beside gate_up's and could not start (and fill their rings) while it streams. nullopt
// (nothing launched) without a plan.
std::optional<cudaError_t> launchBulk(void (*kernel)(FusedMoeArgs, int), const FusedMoeArgs& a,
                                      const BulkPlan& plan, cudaStream_t stream) {
  if (plan.blocks == 0) return std::nullopt;
  cudaError_t e =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(plan.shared));
  if (e == cudaSuccess)
    e = cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                             int(cudaSharedmemCarveoutMaxShared));
  if (e != cudaSuccess) return e;
  return launchKernel(kernel, dim3(unsigned(plan.blocks)), dim3(kBulkThreads), plan.shared, stream,
                      a, plan.slots);
}

}  // namespace

BulkStages oneTokenBulkStages(const FusedMoeArgs& a) {
  const MoeBulkStages setting = RuntimeSwitches::current().moeBulk;
  BulkStages stages;
  dispatch(a.dtype, [&](auto t) {
    using T = decltype(t);
    stages.gateUp = setting != MoeBulkStages::None && gateUpPlan<T>(a).blocks > 0;
    stages.down = setting == MoeBulkStages::Both && downPlan<T>(a).blocks > 0;
    return cudaSuccess;
  });
  return stages;
}

std::optional<cudaError_t> launchBulkGateUp(const FusedMoeArgs& a, cudaStream_t stream) {
  if (RuntimeSwitches::current().moeBulk == MoeBulkStages::None) return std::nullopt;
  std::optional<cudaError_t> launched;
  dispatch(a.dtype, [&](auto t) {
    using T = decltype(t);
    launched = launchBulk(gateUpBulkKernel<T>, a, gateUpPlan<T>(a), stream);
    return cudaSuccess;
  });
  return launched;
}

std::optional<cudaError_t> launchBulkDown(const FusedMoeArgs& a, cudaStream_t stream) {
  if (RuntimeSwitches::current().moeBulk != MoeBulkStages::Both) return std::nullopt;
  std::optional<cudaError_t> launched;
  dispatch(a.dtype, [&](auto t) {
    using T = decltype(t);
    launched = launchBulk(downBulkKernel<T>, a, downPlan<T>(a), stream);
    return cudaSuccess;
  });
  return launched;
}

}  // namespace shardscope::kernels
