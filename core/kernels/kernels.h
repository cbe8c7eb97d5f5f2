// Fused CUDA kernels for the memory-bound steps of a decoder layer (CUDA builds only). The
// launchers take plain pointers and a stream so that nvcc never compiles LibTorch headers;
// fused_ops.h is the ATen-facing side. Every kernel rounds where Hugging Face's eager modules round
// (to the activation dtype after each op), so fused and unfused paths agree to the last bit or ulp.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

// Host and device under nvcc (the .cu files), host alone in the ATen side.
#ifdef __CUDACC__
#define SHARDSCOPE_HOST_DEVICE __host__ __device__
#else
#define SHARDSCOPE_HOST_DEVICE
#endif

namespace shardscope::kernels {

enum class DType { Float, BFloat16, Half };

// RMSNorm of `rows` rows of `dim` elements: out = w * round(x * rsqrt(mean(x^2) + eps)), fp32
// inside. Row r is head (r % heads) of token (r / heads): x + (r / heads) * tokenStride +
// (r % heads) * dim, so the q/k heads of a fused qkv row are normed where they lie. With
// `residual` set, x + residual (rounded) is normed and written to `residualOut`, as vLLM's
// fused_add_rms_norm. `out` and `residualOut` are contiguous [rows, dim].
struct RmsNormArgs {
  DType dtype = DType::Float;
  const void* x = nullptr;
  int64_t heads = 1, tokenStride = 0;
  const void* residual = nullptr;
  void* residualOut = nullptr;
  void* out = nullptr;
  const void* weight = nullptr;
  int64_t rows = 0, dim = 0;
  float eps = 1e-6f;
};
cudaError_t rmsNorm(const RmsNormArgs& a, cudaStream_t stream);

// Rotary position embedding (rotate_half convention) of q [tokens, qHeads * headDim] and
// k [tokens, kHeads * headDim] (rows at their strides) into contiguous qOut / kOut, with cos/sin
// tables [maxPositions, headDim / 2] in the activation dtype read at positions[t] (int64).
struct RotaryArgs {
  DType dtype = DType::Float;
  const void* q = nullptr;
  int64_t qStride = 0, qHeads = 0;
  const void* k = nullptr;
  int64_t kStride = 0, kHeads = 0;
  void* qOut = nullptr;
  void* kOut = nullptr;
  const void* cos = nullptr;
  const void* sin = nullptr;
  const int64_t* positions = nullptr;
  int64_t tokens = 0, headDim = 0;
};
cudaError_t rotary(const RotaryArgs& a, cudaStream_t stream);

// out[r, i] = silu(x[r, i]) * x[r, half + i] for contiguous x [rows, 2 * half].
struct SiluAndMulArgs {
  DType dtype = DType::Float;
  const void* x = nullptr;
  void* out = nullptr;
  int64_t rows = 0, half = 0;
};
cudaError_t siluAndMul(const SiluAndMulArgs& a, cudaStream_t stream);

// y = x w^T (+ bias) for a few rows of x (decode steps): x [rows, k], w [n, k] (row-major, as
// the checkpoint stores a linear weight), y [rows, n], all contiguous; fp32 accumulation. One warp
// streams each weight row once for all rows of x, so the step reads its weights at close to copy
// bandwidth. rows at most kMaxGemvRows; k a multiple of 16 bytes' worth of elements.
constexpr int64_t kMaxGemvRows = 4;
//
// Two fusions for a decoder layer's unobserved steps, each rounding as the kernels it replaces:
// - normWeight set: x is first replaced by rmsNorm(x (+ residual)) exactly as rmsNorm computes it
//   (each block recomputes the rows into shared memory, rows * k elements, within
//   gemvNormFits); block 0 writes x + residual to residualOut. The norm before qkv_proj and
//   gate_up_proj.
// - swiGlu: w holds 2n rows, n gate rows then n up rows; y [rows, n] is siluAndMul of what gemv
//   would write for them (SwiGLU in gate_up_proj's epilogue).
struct GemvArgs {
  DType dtype = DType::Float;
  const void* x = nullptr;
  const void* w = nullptr;
  const void* bias = nullptr;
  void* y = nullptr;
  int64_t rows = 0, n = 0, k = 0;
  const void* normWeight = nullptr;
  const void* residual = nullptr;
  void* residualOut = nullptr;
  float eps = 1e-6f;
  bool swiGlu = false;
};
cudaError_t gemv(const GemvArgs& a, cudaStream_t stream);
// Whether `rows` normed rows of k elements fit in one block's shared memory on `device`.
bool gemvNormFits(DType dtype, int64_t rows, int64_t k, int device);

// A decode step's attention input, from the fused qkv rows [tokens, (qHeads + 2 kvHeads) * d]:
// per-head RMSNorm of q and k (when the weights are set; Qwen3), rotary at positions[t], q into
// qOut [tokens, qHeads * d], k and v straight into this layer's cache [slots, capacity, kvHeads,
// d] at (slots[t], positions[t]). Rounds as the separate modules do.
struct QkvToCacheArgs {
  DType dtype = DType::Float;
  const void* qkv = nullptr;
  int64_t qkvStride = 0, qHeads = 0, kvHeads = 0, headDim = 0;
  const void* qNorm = nullptr;
  const void* kNorm = nullptr;
  float eps = 1e-6f;
  const void* cos = nullptr;
  const void* sin = nullptr;
  const int64_t* positions = nullptr;
  const int64_t* slots = nullptr;
  void* qOut = nullptr;
  void* keyCache = nullptr;
  void* valueCache = nullptr;
  int64_t slotStride = 0;  // elements between two slots of a cache
  int64_t tokens = 0;
};
cudaError_t qkvToCache(const QkvToCacheArgs& a, cudaStream_t stream);

// One new token per request attending over its cached keys 0..positions[r] (flash-decoding):
// q [requests, qHeads * d], caches as above, out [requests, qHeads * d]; query head h reads KV
// head h / (qHeads / kvHeads). The keys are cut into `splits` chunks of kDecodeAttentionChunk
// keys, each chunk a block; with more than one split, `partial` (float, requests * qHeads *
// splits * (d + 2)) holds each chunk's unnormalised output, max and sum until a second kernel
// combines them. Takes query groups of 1, 2, 4 or 8 heads and head sizes 64, 128 or 256.
struct DecodeAttentionArgs {
  DType dtype = DType::Float;
  const void* q = nullptr;
  const void* keyCache = nullptr;
  const void* valueCache = nullptr;
  int64_t slotStride = 0;
  const int64_t* slots = nullptr;
  const int64_t* positions = nullptr;
  void* out = nullptr;
  float* partial = nullptr;
  int64_t requests = 0, qHeads = 0, kvHeads = 0, headDim = 0;
  int64_t splits = 1;
  float scale = 1.f;
};
constexpr int64_t kDecodeAttentionChunk = 512;
bool decodeAttentionSupports(int64_t group, int64_t headDim);
cudaError_t decodeAttention(const DecodeAttentionArgs& a, cudaStream_t stream);

// qkvToCache and decodeAttention as one kernel for a step whose keys fit one chunk (positions[t]
// < kDecodeAttentionChunk): `cache` as for qkvToCache (qOut unused, tokens = requests), out
// [requests, qHeads * d]. The cache and out are the two kernels' bits; one launch fewer, and the
// earlier steps' keys are loaded while the kernel before finishes.
struct QkvDecodeAttentionArgs {
  QkvToCacheArgs cache;
  void* out = nullptr;
  float scale = 1.f;
};
cudaError_t qkvDecodeAttention(const QkvDecodeAttentionArgs& a, cudaStream_t stream);

// Rows to RMSNorm inside a kernel (norm_rows.cuh): x [rows, k] (plus residual [rows, k] when
// set) and the norm's weight [k]; block 0 writes x + residual to residualOut when it is set.
struct NormRowsArgs {
  const void* x = nullptr;
  const void* residual = nullptr;
  const void* normWeight = nullptr;
  void* residualOut = nullptr;
  int64_t k = 0;
  float eps = 1e-6f;
};

// FusedMoE for a few tokens with no host sync (recordable in CUDA graphs): the routing stays on
// the GPU. For x [tokens, hidden], the chosen experts ids [tokens, topK] (int64) with weights
// [tokens, topK], and this rank's experts firstExpert.. (w13 [localExperts, 2 inter, hidden]:
// gate rows then up rows; w2 [localExperts, hidden, inter]): h [tokens * topK, inter] and out
// [tokens * topK, hidden] are scratch, routing (int32, fusedMoeRoutingInts) too; y [tokens,
// hidden] gets each token's local experts' sum. Only the chosen experts' weights are read; each
// rounds as Hugging Face's expert loop does. Three kernels: the routing lists, gate_up + SwiGLU,
// and down, whose last block of each row range adds the tokens' experts in increasing order.
// With `select.logits` set, the first kernel also chooses the experts (see MoeSelectArgs) into
// select.ids / select.weights, and the others read them there (ids and weights are then unused).
constexpr int64_t kFusedMoeMaxPairs = 4096;    // tokens * topK
constexpr int64_t kFusedMoeMaxExperts = 4096;  // local experts
// Fewest output rows one block of the down kernel covers (its blocks count themselves done per
// range of rows; the routing buffer has room for the most ranges any variant uses).
constexpr int64_t kFusedMoeRowsPerBlock = 8;
inline int64_t fusedMoeRoutingInts(int64_t pairs, int64_t localExperts, int64_t hidden) {
  const int64_t slots = pairs < localExperts ? pairs : localExperts;
  const int64_t rowBlocks = (hidden + kFusedMoeRowsPerBlock - 1) / kFusedMoeRowsPerBlock;
  return 2 + 2 * slots + 2 * pairs + rowBlocks;
}
// The router's choice as Hugging Face's Qwen3MoeSparseMoeBlock makes it, one warp per token:
// p = softmax(logits [tokens, experts]) in fp32 (max, then the sum of exp(l - max) in the order
// of ATen's warp softmax), the topK largest p by decreasing value (ties: the lower expert),
// divided by their sum when normTopkProb, times scale (when not 1), cast to dtype. Writes ids
// [tokens, topK] (int64) and weights [tokens, topK] (dtype).
struct MoeSelectArgs {
  const void* logits = nullptr;
  int64_t experts = 0;
  bool normTopkProb = false;
  float scale = 1.f;
  int64_t* ids = nullptr;
  void* weights = nullptr;
};
constexpr int64_t kMoeSelectMaxTopK = 32;
// With routerWeight [select.experts, hidden] set (at most kMoeRouterMaxTokens tokens), the first
// kernel also computes the router logits x routerWeight^T into routerLogits [tokens,
// select.experts] (rounded as the GEMV kernel rounds) and chooses from them; routerDone is an
// int zero on the device that the kernel leaves zero (it counts the kernel's blocks).
constexpr int64_t kMoeRouterMaxTokens = 4;
struct FusedMoeArgs {
  DType dtype = DType::Float;
  const void* x = nullptr;
  const int64_t* ids = nullptr;
  const void* weights = nullptr;
  MoeSelectArgs select;
  const void* routerWeight = nullptr;
  void* routerLogits = nullptr;
  unsigned* routerDone = nullptr;
  const void* w13 = nullptr;
  const void* w2 = nullptr;
  void* h = nullptr;
  void* out = nullptr;
  void* y = nullptr;
  int* routing = nullptr;
  int64_t tokens = 0, topK = 0, hidden = 0, inter = 0;
  int64_t firstExpert = 0, localExperts = 0;
  // With routerWeight and norm.normWeight set, x is the hidden state before the layer's
  // post-attention RMSNorm: each router block norms it (norm.x = x, norm.residual added and
  // written to norm.residualOut) and block 0 writes the normed rows to `normed` [tokens, hidden],
  // which the expert kernels read; one launch fewer than the norm as its own kernel.
  NormRowsArgs norm;
  void* normed = nullptr;
};
// The most dynamic shared memory the router kernel takes: under the 48 KB default with room for
// its static shared memory, so no opt-in.
constexpr size_t kMoeRouterMaxShared = 44 * 1024;
// Bytes of the router kernel's normed rows (with the norm folded in; 16-byte aligned), before
// its 2 ints per local expert for the routing lists.
SHARDSCOPE_HOST_DEVICE inline size_t moeRouterNormBytes(int64_t elementBytes, int64_t tokens,
                                                        int64_t hidden, bool norm) {
  return norm ? (size_t(tokens * hidden * elementBytes) + 15) / 16 * 16 : 0;
}
SHARDSCOPE_HOST_DEVICE inline size_t moeRouterSharedBytes(int64_t elementBytes, int64_t tokens,
                                                          int64_t hidden, int64_t localExperts,
                                                          bool norm) {
  return moeRouterNormBytes(elementBytes, tokens, hidden, norm) +
         size_t(2 * localExperts) * sizeof(int);
}
// Only the choice (MoeSelectArgs) for `tokens` rows of logits, as the first fused kernel makes it.
cudaError_t moeSelect(DType dtype, const MoeSelectArgs& a, int64_t tokens, int64_t topK,
                      cudaStream_t stream);
cudaError_t fusedMoe(const FusedMoeArgs& a, cudaStream_t stream);

// The experts' outputs of a prefill combined per token: y[t] = the sum over t's choices j, in
// increasing expert id (ids [tokens, topK] int64, distinct per token), of round(down[rowOf[t
// topK + j]] * weights[t, j]), each add rounded; rowOf -1 (another rank's expert) adds a zero
// row. down [rows, hidden], weights [tokens, topK] and y [tokens, hidden] in dtype, contiguous.
// Bit for bit what GroupedExperts' ATen chain (multiply, index_copy into zeros, gather by expert,
// adds) computes.
constexpr int64_t kMoeCombineMaxTopK = 32;
struct MoeCombineArgs {
  DType dtype = DType::Float;
  const void* down = nullptr;
  const int64_t* rowOf = nullptr;
  const void* weights = nullptr;
  const int64_t* ids = nullptr;
  void* y = nullptr;
  int64_t tokens = 0, topK = 0, hidden = 0;
};
cudaError_t moeCombine(const MoeCombineArgs& a, cudaStream_t stream);

}  // namespace shardscope::kernels
