
#include <cooperative_groups.h>

#include <map>
#include <mutex>
#include <tuple>

#include "block_choice.cuh"
#include "core/runtime_switches.h"
#include "fused_moe_one_token.cuh"
#include "norm_rows.cuh"

// Why: at batch 1 the three-kernel path spent its time in latency, not bytes. The router kernel's
// last block chose, built lists through global memory and zeroed counts; gate_up and down read
// the lists back (dependent loads before the first weight load); down's last block of each row
// range combined the experts after a fence and an atomic. Here each block chooses from the
// 128-odd logits itself (one warp, two redux instructions a round), down loads its first weights
// before waiting on gate_up, and one block adds its rows' experts from shared memory. Every sum
// is added in the order of the general kernels (dotRows, combineRows), so the bits are the same.

namespace shardscope::kernels {
namespace {

using GateUp = WideGateUp;    // 3 intermediate rows a warp: 8 x 32 blocks for Qwen3-30B-A3B
constexpr int kDownRows = 8;  // output rows a block (one wave of 256 blocks at hidden 2048)

// h[j, i] = round(round(silu(round(x . G_e[i]))) * round(x . U_e[i])) for choice j = blockIdx.x
// of expert e; warp w of block y computes intermediate rows (y * kWarps + w) * kRows + g, with
// GateUp::kAhead loads of each of its 2 kRows weight rows in flight.
// x: the token's (normed) row, in global or this block's shared memory.
template <typename T>
__device__ __forceinline__ void gateUpRows(const FusedMoeArgs& a, const BlockChoice& choice,
                                           const T* x) {
  constexpr int R = GateUp::kRows;
  const int lane = threadIdx.x % 32, j = int(blockIdx.x);
  const int64_t expert = int64_t(choice.chosen[j]) - a.firstExpert;
  const int64_t i0 = (int64_t(blockIdx.y) * kWarps + threadIdx.x / 32) * R;
  if (expert < 0 || expert >= a.localExperts || i0 >= a.inter) return;  // another rank's expert
  const T* gateUp[2 * R];
  gateUpRowPointers<T, R>(static_cast<const T*>(a.w13) + expert * 2 * a.inter * a.hidden, i0,
                          a.inter, a.hidden, gateUp);
  const T* rows[1] = {x};
  float acc[2 * R][1] = {};
  dotRows<T, 2 * R, GateUp::kAhead, 1>(gateUp, rows, 1, a.hidden, acc);
  if (lane != 0) return;
#pragma unroll
  for (int g = 0; g < R; ++g) {
    const int64_t i = i0 + g;
    if (i >= a.inter) break;
    static_cast<T*>(a.h)[j * a.inter + i] = swiGlu<T>(acc[2 * g][0], acc[2 * g + 1][0]);
  }
}

template <typename T>
__global__ void __launch_bounds__(kWarps * 32, GateUp::kMinBlocks)
    gateUpOneTokenKernel(FusedMoeArgs a) {
  __shared__ BlockChoice choice;
  waitForPreviousKernel();  // the logits
  allowNextKernel();
  chooseInBlock<T, false>(a, choice);
  gateUpRows<T>(a, choice, static_cast<const T*>(a.x));
}

// The router and gate_up in one kernel (SHARDSCOPE_MOE_ROUTER_IN_GATE_UP=1): one kernel boundary
// and the logits' round trip through global memory fewer than routerKernel before
// gateUpOneTokenKernel. Launched in clusters of routerCluster(a) blocks along y. Block r of a
// cluster computes the logits of experts r * kWarps + w (warp w) exactly as routerKernel does
// (its row loaded before the wait, x normed first with NORM, the same adds and rounding: the
// logits equal fused::gemv's) and writes each into the choice of every block of its cluster
// (distributed shared memory); after the cluster's barrier every block chooses from them and
// streams its rows of gate_up from x. The first cluster writes the logits to routerLogits, for
// down's choice, and fences before any block lets down start.
template <typename T, bool NORM>
__global__ void __launch_bounds__(kWarps * 32, GateUp::kMinBlocks)
    routerGateUpOneTokenKernel(FusedMoeArgs a) {
  extern __shared__ __align__(16) unsigned char normedShared[];
  constexpr int VEC = 16 / sizeof(T);
  __shared__ BlockChoice choice;
  const cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
  const unsigned rank = cluster.block_rank(), size = cluster.num_blocks();
  const int lane = threadIdx.x % 32;
  const int64_t e = int64_t(rank) * kWarps + threadIdx.x / 32;
  RouterRowDot<T, 1> row(a, e);
  const bool mine = row.mine;
  int4 normWeight{};
  if constexpr (NORM) normWeight = normWeightAhead<T, VEC>(a.norm);
  clusterArrive<false>();
  waitForPreviousKernel();  // x (and its residual)
  T* xs = reinterpret_cast<T*>(normedShared);
  const T* x = NORM ? xs : static_cast<const T*>(a.x);
  if constexpr (NORM) {
    NormRowsArgs norm = a.norm;
    if (blockIdx.x != 0 || blockIdx.y != 0) norm.residualOut = nullptr;  // one block writes it
    normRows<T, VEC>(norm, 1, xs, normWeight);  // ends with a barrier: xs is whole
  }
  float acc[1];
  row.dot(x, 1, acc);
  const bool first = blockIdx.x == 0 && blockIdx.y < size;
  clusterWait();  // every block of the cluster has started
  if (mine && lane == 0) {
    const T logit = fromFloat<T>(acc[0]);
    for (unsigned r = 0; r < size; ++r) cluster.map_shared_rank(choice.p, r)[e] = toFloat(logit);
    if (first) {
      // Down chooses from these before its wait, once every block of this grid has let it start
      // (below). The fence makes them visible to the whole GPU before this thread's block passes
      // the cluster's barrier and lets down start; PTX promises a later kernel the writes only
      // after its wait, so this leans on the fence and on down reading through L2 (__ldcg).
      static_cast<T*>(a.routerLogits)[e] = logit;
      __threadfence();
    }
  }
  __syncwarp();  // the barrier is .aligned: every lane of the warp reaches it together
  clusterArrive<true>();
  clusterWait();
  allowNextKernel();
  chooseInBlock<T, false, true>(a, choice);
  gateUpRows<T>(a, choice, x);
}

// y[o] for the kDownRows rows o of block b: warp w computes choice j = w (then w + kWarps, ...)
// on those rows, round(round(h_j . D_e[o]) * weight_j), into shared memory; then each row adds
// the local choices in increasing expert order from zero, each add rounded (combineRows' order).
// A lane loads kHeld 16-byte chunks of each of the 8 rows at a time (a pass), held as words from
// one row pointer a warp: 90 registers in bf16 where a pointer and a Vec a row took 111 (a 30B
// step 2.92-2.96 ms on H100s, 2.98-2.99 before). Three chunks a pass (128 registers), or 64
// registers so that a block fits on an SM beside gate_up's two, were slower (RESULTS run 18).
// The choice and the warp's first pass come before the wait on gate_up: neither depends on it
// (the logits are two kernels back, complete before gate_up let this one start; with the router
// inside gate_up, written and fenced before any gate_up block lets this one start).
// With weightsToL2, each warp asks L2 for its first expert's rows before the wait, too.
template <typename T>
__global__ void __launch_bounds__(kWarps * 32, 2)
    downOneTokenKernel(FusedMoeArgs a, bool weightsToL2) {
  // One chunk a pass, written as passes because this is the code measured: the same loop written
  // a chunk at a time compiles to 94 registers (ptxas), not run on a GPU.
  constexpr int kHeld = 1;
  constexpr int VEC = 16 / sizeof(T);
  constexpr int64_t kChunk = 32 * VEC, kPass = kHeld * kChunk;
  __shared__ float outs[kMaxChoices][kDownRows];
  __shared__ BlockChoice choice;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, topK = int(a.topK);
  const int64_t o0 = int64_t(blockIdx.x) * kDownRows;
  chooseInBlock<T, true>(a, choice);
  // Row r of the block in expert e's down weights starts r * inter past rowsOf(e) (a row past
  // hidden reads the last row; not written).
  const int lastRow = int(min(int64_t(kDownRows), a.hidden - o0)) - 1;
  const auto rowsOf = [&](int64_t e) {
    return static_cast<const T*>(a.w2) + (e * a.hidden + o0) * a.inter;
  };
  const int64_t k0 = int64_t(lane) * VEC;
  const int64_t firstE = warp < topK ? choice.expert[warp] : -1;
  const T* w = nullptr;
  int4 held[kDownRows][kHeld];  // words, not Vecs: see loadWords
  const auto loadPass = [&](int64_t k) {
#pragma unroll
    for (int r = 0; r < kDownRows; ++r) {
      const T* row = w + int64_t(min(r, lastRow)) * a.inter;
#pragma unroll
      for (int u = 0; u < kHeld; ++u) {
        if (k + u * kChunk < a.inter) held[r][u] = loadWords(row + k + u * kChunk);
      }
    }
  };
  if (firstE >= 0) {
    w = rowsOf(firstE);
    loadPass(k0);
    if (weightsToL2) warpPrefetchToL2(w, (lastRow + 1) * a.inter * int64_t(sizeof(T)));
  }
  waitForPreviousKernel();  // h
  allowNextKernel();
  for (int j = warp; j < topK; j += kWarps) {
    const int64_t e = choice.expert[j];
    const float wj = choice.weight[j];
    if (e < 0) continue;
    if (j != warp) w = rowsOf(e);
    const T* hj = static_cast<const T*>(a.h) + j * a.inter;
    float acc[kDownRows] = {};
    for (int64_t k = k0; k < a.inter; k += kPass) {
      if (j != warp || k != k0) loadPass(k);
#pragma unroll
      for (int u = 0; u < kHeld; ++u) {
        const int64_t at = k + u * kChunk;
        if (at >= a.inter) break;
        const Vec<T, VEC> xv = load<T, VEC>(hj + at);
#pragma unroll
        for (int r = 0; r < kDownRows; ++r) {
          const Vec<T, VEC> wr = asVec<T, VEC>(held[r][u]);
#pragma unroll
          for (int i = 0; i < VEC; ++i)
            acc[r] = __fmaf_rn(toFloat(wr.v[i]), toFloat(xv.v[i]), acc[r]);
        }
      }
    }
#pragma unroll
    for (int r = 0; r < kDownRows; ++r) {
      for (int o = 16; o > 0; o >>= 1) acc[r] += __shfl_xor_sync(kFull, acc[r], o);
    }
    if (lane == 0) {
#pragma unroll
      for (int r = 0; r < kDownRows; ++r)
        outs[j][r] = toFloat(fromFloat<T>(__fmul_rn(toFloat(fromFloat<T>(acc[r])), wj)));
    }
  }
  __syncthreads();
  const int r = threadIdx.x;
  if (r >= kDownRows || o0 + r >= a.hidden) return;
  float y = 0.f;
  for (int n = 0; n < topK; ++n) {
    const int j = choice.byExpert[n];
    if (choice.expert[j] >= 0) y = addRounded<T>(y, outs[j][r]);
  }
  static_cast<T*>(a.y)[o0 + r] = fromFloat<T>(y);
}

}  // namespace
}  // namespace shardscope::kernels

namespace shardscope::kernels {

namespace {

constexpr int64_t kGateRange = int64_t(kWarps) * GateUp::kRows;  // intermediate rows a block
constexpr unsigned kMaxRouterCluster = 16;  // the most blocks a cluster holds on sm_90

dim3 gateUpGrid(const FusedMoeArgs& a) {
  return dim3(unsigned(a.topK), unsigned((a.inter + kGateRange - 1) / kGateRange));
}

// routerGateUpOneTokenKernel's cluster: a warp an expert, in a power of two of blocks.
unsigned routerCluster(const FusedMoeArgs& a) {
  const int64_t blocks = (a.select.experts + kWarps - 1) / kWarps;
  unsigned size = 1;
  while (size < blocks) size *= 2;
  return size;
}

using MoeKernel = void (*)(FusedMoeArgs);

template <typename T>
MoeKernel routerGateUpFor(bool norm) {
  return norm ? routerGateUpOneTokenKernel<T, true> : routerGateUpOneTokenKernel<T, false>;
}
// routerGateUpOneTokenKernel for a's element type, norming x first when a.norm asks.
MoeKernel routerGateUpKernel(const FusedMoeArgs& a) {
  const bool norm = a.norm.normWeight != nullptr;
  switch (a.dtype) {
    case DType::Float:
      return routerGateUpFor<float>(norm);
    case DType::BFloat16:
      return routerGateUpFor<__nv_bfloat16>(norm);
    case DType::Half:
      return routerGateUpFor<__half>(norm);
  }
  return nullptr;
}

// Whether the current device runs `kernel` in clusters of `size` blocks along y with `shared`
// bytes of dynamic shared memory a block: not before sm_90, nor where a partition (MPS, MIG)
// leaves too few SMs a GPC. Past 8 blocks the kernel must first allow a non-portable size.
// Asked once a device and shape (the answer does not change; the launch path is hot). An error
// that is not such a refusal (one an earlier launch left) is left for the next launch to report,
// and nothing is remembered.
bool clustersFit(MoeKernel kernel, dim3 grid, unsigned size, size_t shared) {
  static_assert(kMoeRouterMaxShared + sizeof(BlockChoice) <= 48 * 1024,
                "past 48 KB of shared memory the kernel must first be allowed it");
  using Key = std::tuple<MoeKernel, int, unsigned, unsigned, size_t>;
  static std::mutex mutex;
  static std::map<Key, bool> known;
  int device = 0;
  if (!kernel || cudaGetDevice(&device) != cudaSuccess) return false;
  const Key key{kernel, device, grid.y, size, shared};
  const std::lock_guard<std::mutex> lock(mutex);
  if (const auto it = known.find(key); it != known.end()) return it->second;
  cudaError_t e = cudaSuccess;
  if (size > 8) e = cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
  int clusters = 0;
  if (e == cudaSuccess) {
    cudaLaunchConfig_t config = {};
    config.gridDim = grid;
    config.blockDim = dim3(kWarps * 32);
    config.dynamicSmemBytes = shared;
    cudaLaunchAttribute cluster;
    cluster.id = cudaLaunchAttributeClusterDimension;
    cluster.val.clusterDim.x = 1;
    cluster.val.clusterDim.y = size;
    cluster.val.clusterDim.z = 1;
    config.attrs = &cluster;
    config.numAttrs = 1;
    e = cudaOccupancyMaxActiveClusters(&clusters, kernel, &config);
  }
  if (e == cudaSuccess) return known[key] = clusters > 0;
  const bool refused = e == cudaErrorInvalidValue || e == cudaErrorNotSupported ||
                       e == cudaErrorInvalidClusterSize || e == cudaErrorNoKernelImageForDevice ||
                       e == cudaErrorInvalidDeviceFunction;
  if (!refused) return false;
  (void)cudaGetLastError();  // the refusal is the answer, not a failure to report
  return known[key] = false;
}

// routerGateUpOneTokenKernel's dynamic shared memory: the token's normed row, when it norms x.
size_t routerGateUpShared(const FusedMoeArgs& a) {
  return moeRouterNormBytes(a.dtype == DType::Float ? 4 : 2, 1, a.hidden,
                            a.norm.normWeight != nullptr);
}

cudaError_t launchDown(const FusedMoeArgs& a, cudaStream_t stream) {
  return dispatch(a.dtype, [&](auto t) -> cudaError_t {
    using T = decltype(t);
    const int64_t bytes = a.topK * a.hidden * a.inter * int64_t(sizeof(T));  // the chosen experts'
    return launchKernel(downOneTokenKernel<T>,
                        dim3(unsigned((a.hidden + kDownRows - 1) / kDownRows)), dim3(kWarps * 32),
                        0, stream, a, weightsFitL2(bytes));
  });
}

}  // namespace

bool routerInGateUpTakes(const FusedMoeArgs& a) {
  const unsigned size = routerCluster(a);
  const size_t shared = routerGateUpShared(a);
  return RuntimeSwitches::current().moeRouterInGateUp && oneTokenExpertsTake(a) && a.routerWeight &&
         a.routerLogits && a.select.logits == a.routerLogits && size <= kMaxRouterCluster &&
         gateUpGrid(a).y % size == 0 && shared <= kMoeRouterMaxShared &&
         clustersFit(routerGateUpKernel(a), gateUpGrid(a), size, shared);
}

cudaError_t launchRouterInGateUp(const FusedMoeArgs& a, cudaStream_t stream) {
  if (!routerInGateUpTakes(a)) return cudaErrorInvalidValue;
  const size_t shared = routerGateUpShared(a);
  const cudaError_t gateUp = launchKernelIn(dim3(1, routerCluster(a), 1), routerGateUpKernel(a),
                                            gateUpGrid(a), dim3(kWarps * 32), shared, stream, a);
  return gateUp != cudaSuccess ? gateUp : launchDown(a, stream);
}

bool oneTokenExpertsTake(const FusedMoeArgs& a) {
  return RuntimeSwitches::current().moeOneToken && a.tokens == 1 && a.select.logits &&
         a.select.ids && a.select.weights && a.select.experts >= a.topK &&
         a.select.experts <= 32 * kLaneExperts && a.topK <= kMaxChoices;
}

cudaError_t launchOneTokenExperts(const FusedMoeArgs& a, cudaStream_t stream) {
  if (!oneTokenExpertsTake(a)) return cudaErrorInvalidValue;
  const cudaError_t gateUp = dispatch(a.dtype, [&](auto t) -> cudaError_t {
    return launchKernel(gateUpOneTokenKernel<decltype(t)>, gateUpGrid(a), dim3(kWarps * 32), 0,
                        stream, a);
  });
  return gateUp != cudaSuccess ? gateUp : launchDown(a, stream);
}

}  // namespace shardscope::kernels
