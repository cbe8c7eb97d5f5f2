// Shared device helpers of the fused kernels: activation <-> fp32 conversion, explicit rounding
// (no FMA contraction, so each op rounds as the unfused ATen op does), 16-byte vectors, block
// sums and reductions, and the dispatch from DType (and attention shapes) to template arguments.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "core/runtime_switches.h"
#include "kernels.h"

namespace shardscope::kernels {

__device__ __forceinline__ float toFloat(float x) {
  return x;
}
__device__ __forceinline__ float toFloat(__nv_bfloat16 x) {
  return __bfloat162float(x);
}
__device__ __forceinline__ float toFloat(__half x) {
  return __half2float(x);
}

template <typename T>
__device__ __forceinline__ T fromFloat(float x);
template <>
__device__ __forceinline__ float fromFloat<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __nv_bfloat16 fromFloat<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
template <>
__device__ __forceinline__ __half fromFloat<__half>(float x) {
  return __float2half_rn(x);
}

// The value an ATen op on two T operands produces: computed in fp32, rounded to T.
template <typename T>
__device__ __forceinline__ float mulRounded(float a, float b) {
  return toFloat(fromFloat<T>(__fmul_rn(a, b)));
}
template <typename T>
__device__ __forceinline__ float addRounded(float a, float b) {
  return toFloat(fromFloat<T>(__fadd_rn(a, b)));
}
template <typename T>
__device__ __forceinline__ float subRounded(float a, float b) {
  return toFloat(fromFloat<T>(__fsub_rn(a, b)));
}

// SiLU(gate) * up from two fp32 sums, rounded as Hugging Face's modules on T round: each sum to
// T (the linear layer's output), the activation, the product (what siluAndMulKernel makes of a
// gate and an up column).
template <typename T>
__device__ __forceinline__ T swiGlu(float gate, float up) {
  const float g = toFloat(fromFloat<T>(gate)), u = toFloat(fromFloat<T>(up));
  const float act = toFloat(fromFloat<T>(__fdiv_rn(g, __fadd_rn(1.f, expf(-g)))));
  return fromFloat<T>(__fmul_rn(act, u));
}

// One rotary pair (x1, x2) at angle (c, s), rounded as transformers' apply_rotary_pos_emb on T:
// (x1 c - x2 s, x2 c + x1 s), each product and the sum rounded.
template <typename T>
__device__ __forceinline__ void rotatePair(float& x1, float& x2, float c, float s) {
  const float r1 = __fsub_rn(mulRounded<T>(x1, c), mulRounded<T>(x2, s));
  const float r2 = __fadd_rn(mulRounded<T>(x2, c), mulRounded<T>(x1, s));
  x1 = r1;
  x2 = r2;
}

// VEC elements moved as one 16-byte (or narrower) access.
template <typename T, int VEC>
struct alignas(sizeof(T) * VEC) Vec {
  T v[VEC];
};

template <typename T, int VEC>
__device__ __forceinline__ Vec<T, VEC> load(const T* p) {
  return *reinterpret_cast<const Vec<T, VEC>*>(p);
}
template <typename T, int VEC>
__device__ __forceinline__ void store(T* p, const Vec<T, VEC>& v) {
  *reinterpret_cast<Vec<T, VEC>*>(p) = v;
}

// 16 bytes held as four words until used: ptxas gave an array of bf16 Vecs held across loops or
// waits a register an element (twice the words), and spilled.
__device__ __forceinline__ int4 loadWords(const void* p) {
  return *reinterpret_cast<const int4*>(p);
}
template <typename T, int VEC>
__device__ __forceinline__ Vec<T, VEC> asVec(const int4& words) {
  static_assert(sizeof(Vec<T, VEC>) == sizeof(int4), "16-byte vectors only");
  return *reinterpret_cast<const Vec<T, VEC>*>(&words);
}

// v as it is, but opaque to the compiler: what it computes from v stays after this point. A row
// held in registers across barriers (the decode attention's key row, bf16) was otherwise converted
// to fp32 ahead of them, which needs twice the registers and spilled.
template <typename T, int VEC>
__device__ __forceinline__ Vec<T, VEC> opaque(Vec<T, VEC> v) {
  static_assert(sizeof(v) == 16, "16-byte vectors only");
  int4& raw = reinterpret_cast<int4&>(v);
  asm volatile("" : "+r"(raw.x), "+r"(raw.y), "+r"(raw.z), "+r"(raw.w));
  return v;
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the result.
__device__ __forceinline__ float blockSum(float x) {
  __shared__ float partial[32];
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  if (warps == 1) return x;
  __syncthreads();  // partial[] may still be read by a previous call
  if (lane == 0) partial[warp] = x;
  __syncthreads();
  x = lane < warps ? partial[lane] : 0.f;
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

// Sum or maximum of GROUP values over the block; every thread gets the results.
template <int GROUP, bool MAX>
__device__ __forceinline__ void blockReduce(float (&v)[GROUP]) {
  __shared__ float partial[32][GROUP];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
#pragma unroll
  for (int g = 0; g < GROUP; ++g) {
    for (int o = 16; o > 0; o >>= 1) {
      const float other = __shfl_xor_sync(0xffffffffu, v[g], o);
      v[g] = MAX ? fmaxf(v[g], other) : v[g] + other;
    }
  }
  __syncthreads();  // partial[] may still be read by a previous call
  if (lane == 0) {
#pragma unroll
    for (int g = 0; g < GROUP; ++g) partial[warp][g] = v[g];
  }
  __syncthreads();
#pragma unroll
  for (int g = 0; g < GROUP; ++g) {
    float x = lane < warps ? partial[lane][g] : (MAX ? -INFINITY : 0.f);
    for (int o = 16; o > 0; o >>= 1) {
      const float other = __shfl_xor_sync(0xffffffffu, x, o);
      x = MAX ? fmaxf(x, other) : x + other;
    }
    v[g] = x;
  }
}

// Programmatic dependent launch (Hopper): a kernel lets the next one start (allowNextKernel)
// and waits for the previous one's results (waitForPreviousKernel) only where it needs them, so
// the next kernel's launch and its first weight loads overlap this one's tail. Without the launch
// attribute both are no-ops.
__device__ __forceinline__ void waitForPreviousKernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void allowNextKernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;");
#endif
}

// Launches `kernel` on `stream`, allowed to overlap the kernel before it (see above).
template <typename... Params, typename... Args>
cudaError_t launchKernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared,
                         cudaStream_t stream, Args&&... args) {
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared;
  config.stream = stream;
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute[0].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attribute;
  config.numAttrs = RuntimeSwitches::current().programmaticLaunch ? 1 : 0;
  const cudaError_t launched = cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
  return launched != cudaSuccess ? launched : cudaGetLastError();
}

// Calls f(group, headDim) with the query group (query heads a KV head) and the head size as
// std::integral_constant: the shapes the decode attention kernels are compiled for
// (decodeAttentionSupports); others are an invalid value.
template <typename F>
cudaError_t dispatchAttentionShape(int64_t group, int64_t headDim, F&& f) {
  const auto withDim = [&](auto g) -> cudaError_t {
    switch (headDim) {
      case 64:
        return f(g, std::integral_constant<int, 64>{});
      case 128:
        return f(g, std::integral_constant<int, 128>{});
      case 256:
        return f(g, std::integral_constant<int, 256>{});
      default:
        return cudaErrorInvalidValue;
    }
  };
  switch (group) {
    case 1:
      return withDim(std::integral_constant<int, 1>{});
    case 2:
      return withDim(std::integral_constant<int, 2>{});
    case 4:
      return withDim(std::integral_constant<int, 4>{});
    case 8:
      return withDim(std::integral_constant<int, 8>{});
    default:
      return cudaErrorInvalidValue;
  }
}

// Calls f(T{}) with the element type of `dtype`.
template <typename F>
cudaError_t dispatch(DType dtype, F&& f) {
  switch (dtype) {
    case DType::Float:
      return f(float{});
    case DType::BFloat16:
      return f(__nv_bfloat16{});
    case DType::Half:
      return f(__half{});
  }
  return cudaErrorInvalidValue;
}

// Whether pointer p and element counts allow VEC-wide accesses.
inline bool aligned(const void* p, int bytes) {
  return reinterpret_cast<uintptr_t>(p) % uintptr_t(bytes) == 0;
}

}  // namespace shardscope::kernels
