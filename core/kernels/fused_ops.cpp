#include "fused_ops.h"

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "../error.h"
#include "../runtime_switches.h"
#include "kernels.h"

namespace shardscope::fused {
namespace {

kernels::DType dtypeOf(const at::Tensor& x) {
  switch (x.scalar_type()) {
    case at::kBFloat16:
      return kernels::DType::BFloat16;
    case at::kHalf:
      return kernels::DType::Half;
    default:
      return kernels::DType::Float;
  }
}

void check(cudaError_t status, const char* op) {
  if (status == cudaSuccess) return;
  throw Error(std::string("fused CUDA kernel ") + op + " failed: " + cudaGetErrorString(status) +
              " (the error may come from an earlier kernel on this stream; SHARDSCOPE_PDL=0 rules "
              "out overlapped launches, device=cpu runs without these kernels; report it with the "
              "model's config)");
}

// An uninitialised tensor shaped like x but with `last` elements in its last dimension.
at::Tensor emptyWithLastDim(const at::Tensor& x, int64_t last) {
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() = last;
  return at::empty(shape, x.options());
}

cudaStream_t streamOf(const at::Tensor& x) {
  return c10::cuda::getCurrentCUDAStream(x.device().index()).stream();
}

bool aligned16(const at::Tensor& t) {  // the kernels' 16-byte loads
  return reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0;
}

// x as rows of its last dim: (heads, tokenStride) for the kernel's row addressing, contiguous
// when it cannot be addressed that way.
struct Rows {
  at::Tensor x;
  int64_t heads = 1, tokenStride = 0;
};

Rows rowsOf(const at::Tensor& x) {
  const int64_t dim = x.size(-1);
  if (x.dim() == 3 && x.stride(2) == 1 && x.stride(1) == dim) return {x, x.size(1), x.stride(0)};
  if (x.dim() == 2 && x.stride(1) == 1) return {x, 1, x.stride(0)};
  at::Tensor c = x.contiguous();
  return {c, 1, dim};
}

at::Tensor norm(const at::Tensor& x, const at::Tensor* residual, at::Tensor* sumOut,
                const at::Tensor& weight, double eps) {
  const c10::cuda::CUDAGuard guard(x.device());
  const Rows rows = rowsOf(x);
  at::Tensor out = at::empty(x.sizes(), x.options());
  kernels::RmsNormArgs a;
  a.dtype = dtypeOf(x);
  a.x = rows.x.data_ptr();
  a.heads = rows.heads;
  a.tokenStride = rows.tokenStride;
  at::Tensor res;
  if (residual) {
    res = residual->contiguous();
    *sumOut = at::empty(x.sizes(), x.options());
    a.residual = res.data_ptr();
    a.residualOut = sumOut->data_ptr();
  }
  a.out = out.data_ptr();
  at::Tensor w = weight.contiguous();
  a.weight = w.data_ptr();
  a.dim = x.size(-1);
  a.rows = x.numel() / a.dim;
  a.eps = float(eps);
  check(kernels::rmsNorm(a, streamOf(x)), "rms_norm");
  return out;
}

}  // namespace

bool usable(const at::Tensor& x, const at::Tensor& like) {
  if (!x.defined() || !x.is_cuda()) return false;
  const auto t = x.scalar_type();
  if (t != at::kFloat && t != at::kBFloat16 && t != at::kHalf) return false;
  return !like.defined() || (like.scalar_type() == t && like.device() == x.device());
}

at::Tensor rmsNorm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  return norm(x, nullptr, nullptr, weight, eps);
}

std::pair<at::Tensor, at::Tensor> addRmsNorm(const at::Tensor& x, const at::Tensor& residual,
                                             const at::Tensor& weight, double eps) {
  SS_ASSERT(x.sizes() == residual.sizes() && x.scalar_type() == residual.scalar_type(),
            "addRmsNorm: x and residual differ in shape or dtype");
  at::Tensor sum;
  at::Tensor out = norm(x, &residual, &sum, weight, eps);
  return {out, sum};
}

std::pair<at::Tensor, at::Tensor> rotary(const at::Tensor& q, const at::Tensor& k,
                                         const at::Tensor& cos, const at::Tensor& sin,
                                         const at::Tensor& positions, int64_t headDim) {
  SS_ASSERT(q.dim() == 2 && k.dim() == 2 && q.scalar_type() == cos.scalar_type(),
            "rotary: expects [T, heads * d] q and k and tables of their dtype");
  const c10::cuda::CUDAGuard guard(q.device());
  const at::Tensor qr = q.stride(1) == 1 ? q : q.contiguous();
  const at::Tensor kr = k.stride(1) == 1 ? k : k.contiguous();
  const at::Tensor c = cos.contiguous(), s = sin.contiguous();
  const at::Tensor p = positions.to(at::kLong).contiguous();
  at::Tensor qOut = at::empty(q.sizes(), q.options()), kOut = at::empty(k.sizes(), k.options());
  kernels::RotaryArgs a;
  a.dtype = dtypeOf(q);
  a.q = qr.data_ptr();
  a.qStride = qr.stride(0);
  a.qHeads = q.size(1) / headDim;
  a.k = kr.data_ptr();
  a.kStride = kr.stride(0);
  a.kHeads = k.size(1) / headDim;
  a.qOut = qOut.data_ptr();
  a.kOut = kOut.data_ptr();
  a.cos = c.data_ptr();
  a.sin = s.data_ptr();
  a.positions = p.data_ptr<int64_t>();
  a.tokens = q.size(0);
  a.headDim = headDim;
  check(kernels::rotary(a, streamOf(q)), "rotary");
  return {qOut, kOut};
}

at::Tensor siluAndMul(const at::Tensor& x) {
  const c10::cuda::CUDAGuard guard(x.device());
  const at::Tensor xc = x.contiguous();
  const int64_t half = x.size(-1) / 2;
  at::Tensor out = emptyWithLastDim(x, half);
  kernels::SiluAndMulArgs a;
  a.dtype = dtypeOf(x);
  a.x = xc.data_ptr();
  a.out = out.data_ptr();
  a.half = half;
  a.rows = half ? x.numel() / x.size(-1) : 0;
  check(kernels::siluAndMul(a, streamOf(x)), "silu_and_mul");
  return out;
}

namespace {

// The rows of x the GEMV kernel takes for x w^T; 0 when it does not take them.
int64_t gemvRows(const at::Tensor& x, const at::Tensor& w) {
  if (!usable(x, w) || w.dim() != 2 || !w.is_contiguous() || x.dim() < 1) return 0;
  const int64_t k = w.size(1);
  if (x.size(-1) != k || k % (16 / int64_t(x.element_size())) != 0) return 0;
  const int64_t rows = x.numel() / k;
  return rows <= kernels::kMaxGemvRows ? rows : 0;
}

}  // namespace

at::Tensor gemv(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias) {
  const int64_t rows = gemvRows(x, w);
  if (rows == 0) return {};
  const int64_t k = w.size(1), n = w.size(0);
  if (bias.defined() && (!usable(bias, w) || bias.numel() != n || !bias.is_contiguous())) return {};
  const c10::cuda::CUDAGuard guard(x.device());
  const at::Tensor xc = x.contiguous();
  at::Tensor y = emptyWithLastDim(x, n);
  kernels::GemvArgs a;
  a.dtype = dtypeOf(x);
  a.x = xc.data_ptr();
  a.w = w.data_ptr();
  a.bias = bias.defined() ? bias.data_ptr() : nullptr;
  a.y = y.data_ptr();
  a.rows = rows;
  a.n = n;
  a.k = k;
  check(kernels::gemv(a, streamOf(x)), "gemv");
  return y;
}

namespace {

// Whether `in` is a shape gemvFused takes: x, w (and the optional tensors) on one GPU in one
// dtype, contiguous, 16-byte aligned, rows within kMaxGemvRows and within shared memory.
bool gemvTakes(const GemvInput& in) {
  const at::Tensor& x = in.x;
  const at::Tensor& w = in.w;
  if (!usable(x, w) || w.dim() != 2 || !w.is_contiguous() || x.dim() != 2 || !x.is_contiguous())
    return false;
  const int64_t k = w.size(1), n = in.swiGlu ? w.size(0) / 2 : w.size(0), rows = x.size(0);
  if (x.size(1) != k || k % (16 / int64_t(x.element_size())) != 0 || !aligned16(x) || !aligned16(w))
    return false;
  if (rows == 0 || rows > kernels::kMaxGemvRows || (in.swiGlu && w.size(0) % 2 != 0)) return false;
  if (in.bias.defined() &&
      (!usable(in.bias, w) || in.bias.numel() != w.size(0) || !in.bias.is_contiguous()))
    return false;
  const auto fits = [&](const at::Tensor& t, int64_t numel) {
    return usable(t, w) && t.is_contiguous() && t.numel() == numel && aligned16(t);
  };
  if (in.residual.defined() && (!in.normWeight.defined() || !fits(in.residual, rows * k) ||
                                in.residual.sizes() != x.sizes()))
    return false;
  if (!in.normWeight.defined()) return n > 0;
  return fits(in.normWeight, k) &&
         kernels::gemvNormFits(dtypeOf(x), rows, k, int(x.device().index()));
}

}  // namespace

GemvOutput gemvFused(const GemvInput& in) {
  if (!gemvTakes(in)) return {};
  const c10::cuda::CUDAGuard guard(in.x.device());
  const int64_t n = in.swiGlu ? in.w.size(0) / 2 : in.w.size(0);
  GemvOutput out;
  out.y = emptyWithLastDim(in.x, n);
  kernels::GemvArgs a;
  a.dtype = dtypeOf(in.x);
  a.x = in.x.data_ptr();
  a.w = in.w.data_ptr();
  a.bias = in.bias.defined() ? in.bias.data_ptr() : nullptr;
  a.y = out.y.data_ptr();
  a.rows = in.x.size(0);
  a.n = n;
  a.k = in.w.size(1);
  a.swiGlu = in.swiGlu;
  if (in.normWeight.defined()) {
    a.normWeight = in.normWeight.data_ptr();
    a.eps = float(in.eps);
  }
  if (in.residual.defined()) {
    out.residualSum = at::empty_like(in.x);
    a.residual = in.residual.data_ptr();
    a.residualOut = out.residualSum.data_ptr();
  }
  check(kernels::gemv(a, streamOf(in.x)), "gemv (fused)");
  return out;
}

bool layerFusion() {
  return RuntimeSwitches::current().fusedDecode;
}

namespace {
kernels::QkvToCacheArgs qkvToCacheArgs(const QkvToCache& in) {
  SS_ASSERT(in.qkv.dim() == 2 && in.qkv.stride(1) == 1 &&
                in.qkv.size(1) == (in.qHeads + 2 * in.kvHeads) * in.headDim &&
                in.keyCache.is_contiguous() && in.valueCache.is_contiguous() &&
                in.cos.scalar_type() == in.qkv.scalar_type(),
            "qkvToCache: unexpected qkv, cache or table layout");
  const int64_t tokens = in.qkv.size(0);
  kernels::QkvToCacheArgs a;
  a.dtype = dtypeOf(in.qkv);
  a.qkv = in.qkv.data_ptr();
  a.qkvStride = in.qkv.stride(0);
  a.qHeads = in.qHeads;
  a.kvHeads = in.kvHeads;
  a.headDim = in.headDim;
  a.qNorm = in.qNorm.defined() ? in.qNorm.data_ptr() : nullptr;
  a.kNorm = in.kNorm.defined() ? in.kNorm.data_ptr() : nullptr;
  a.eps = float(in.eps);
  a.cos = in.cos.data_ptr();
  a.sin = in.sin.data_ptr();
  a.positions = in.positions.data_ptr<int64_t>();
  a.slots = in.slots.data_ptr<int64_t>();
  a.keyCache = in.keyCache.data_ptr();
  a.valueCache = in.valueCache.data_ptr();
  a.slotStride = in.keyCache.stride(0);
  a.tokens = tokens;
  return a;
}
}  // namespace

at::Tensor qkvToCache(const QkvToCache& in) {
  kernels::QkvToCacheArgs a = qkvToCacheArgs(in);
  const c10::cuda::CUDAGuard guard(in.qkv.device());
  at::Tensor q = at::empty({a.tokens, in.qHeads * in.headDim}, in.qkv.options());
  a.qOut = q.data_ptr();
  check(kernels::qkvToCache(a, streamOf(in.qkv)), "qkv_to_cache");
  return q;
}

at::Tensor qkvDecodeAttention(const QkvToCache& in, int64_t span, double scale) {
  if (span > kernels::kDecodeAttentionChunk || in.kvHeads == 0 || in.qHeads % in.kvHeads != 0 ||
      !kernels::decodeAttentionSupports(in.qHeads / in.kvHeads, in.headDim) ||
      in.qNorm.defined() != in.kNorm.defined() || !usable(in.qkv, in.keyCache) ||
      !RuntimeSwitches::current().fusedAttention)
    return {};
  kernels::QkvDecodeAttentionArgs a;
  a.cache = qkvToCacheArgs(in);
  a.scale = float(scale);
  const c10::cuda::CUDAGuard guard(in.qkv.device());
  at::Tensor out = at::empty({a.cache.tokens, in.qHeads * in.headDim}, in.qkv.options());
  a.out = out.data_ptr();
  check(kernels::qkvDecodeAttention(a, streamOf(in.qkv)), "qkv_decode_attention");
  return out;
}

at::Tensor decodeAttention(const at::Tensor& q, const at::Tensor& keyCache,
                           const at::Tensor& valueCache, const at::Tensor& slots,
                           const at::Tensor& positions, int64_t kvHeads, int64_t span,
                           double scale) {
  const int64_t headDim = keyCache.size(-1), qHeads = q.size(1) / headDim;
  if (!usable(q, keyCache) || !q.is_contiguous() || !keyCache.is_contiguous() ||
      !valueCache.is_contiguous() || kvHeads == 0 || qHeads % kvHeads != 0 ||
      !kernels::decodeAttentionSupports(qHeads / kvHeads, headDim))
    return {};
  const c10::cuda::CUDAGuard guard(q.device());
  const int64_t requests = q.size(0);
  kernels::DecodeAttentionArgs a;
  a.dtype = dtypeOf(q);
  a.q = q.data_ptr();
  a.keyCache = keyCache.data_ptr();
  a.valueCache = valueCache.data_ptr();
  a.slotStride = keyCache.stride(0);
  a.slots = slots.data_ptr<int64_t>();
  a.positions = positions.data_ptr<int64_t>();
  a.requests = requests;
  a.qHeads = qHeads;
  a.kvHeads = kvHeads;
  a.headDim = headDim;
  const int64_t chunk = kernels::kDecodeAttentionChunk;
  a.splits = std::max<int64_t>(1, (span + chunk - 1) / chunk);
  a.scale = float(scale);
  at::Tensor out = at::empty_like(q), partial;
  if (a.splits > 1) {
    partial =
        at::empty({requests * qHeads * a.splits * (headDim + 2)}, q.options().dtype(at::kFloat));
    a.partial = partial.data_ptr<float>();
  }
  a.out = out.data_ptr();
  check(kernels::decodeAttention(a, streamOf(q)), "decode_attention");
  return out;
}

bool fusedMoeTakes(int64_t tokens, int64_t topK, int64_t hidden, int64_t inter,
                   int64_t localExperts) {
  // 16-byte rows for every dtype the kernels take (fp32: 4 elements; 8 covers bf16 and fp16).
  return tokens * topK <= kernels::kFusedMoeMaxPairs &&
         localExperts <= kernels::kFusedMoeMaxExperts && topK <= kernels::kMoeSelectMaxTopK &&
         hidden % 8 == 0 && inter % 8 == 0;
}

namespace {

bool selectable(const at::Tensor& logits, const MoeRouting& r) {
  return usable(logits) && logits.dim() == 2 && r.topK >= 1 &&
         r.topK <= kernels::kMoeSelectMaxTopK && logits.size(1) >= r.topK;
}

// The choice's arguments with its outputs: ids [T, k] int64 and weights [T, k] (logits' dtype).
kernels::MoeSelectArgs selectArgs(const at::Tensor& logits, const MoeRouting& r, at::Tensor& ids,
                                  at::Tensor& weights) {
  const int64_t T = logits.size(0);
  ids = at::empty({T, r.topK}, logits.options().dtype(at::kLong));
  weights = at::empty({T, r.topK}, logits.options());
  kernels::MoeSelectArgs s;
  s.logits = logits.data_ptr();
  s.experts = logits.size(1);
  s.normTopkProb = r.normTopkProb;
  s.scale = float(r.scale);
  s.ids = ids.data_ptr<int64_t>();
  s.weights = weights.data_ptr();
  return s;
}

// The expert kernels' arguments and scratch for x [T, H] with k choices a token.
struct MoeCall {
  kernels::FusedMoeArgs a;
  at::Tensor x, h, out, routing, y;
  std::vector<at::Tensor> scratch;  // what the kernels write on the way (logits, the choice)
};

// Undefined y when the kernels do not take the shapes.
MoeCall moeCall(const at::Tensor& x, int64_t k, const at::Tensor& w13, const at::Tensor& w2,
                int64_t firstExpert) {
  MoeCall c;
  if (!usable(x, w13) || x.dim() != 2) return c;
  const int64_t T = x.size(0), H = x.size(1), E = w13.size(0), I = w2.size(2);
  if (!fusedMoeTakes(T, k, H, I, E) || !w13.is_contiguous() || !w2.is_contiguous()) return c;
  c.x = x.contiguous();
  c.h = at::empty({T * k, I}, x.options());
  c.out = at::empty({T * k, H}, x.options());
  c.routing = at::empty({kernels::fusedMoeRoutingInts(T * k, E, H)}, x.options().dtype(at::kInt));
  c.y = at::empty({T, H}, x.options());
  kernels::FusedMoeArgs& a = c.a;
  a.dtype = dtypeOf(x);
  a.x = c.x.data_ptr();
  a.w13 = w13.data_ptr();
  a.w2 = w2.data_ptr();
  a.h = c.h.data_ptr();
  a.out = c.out.data_ptr();
  a.y = c.y.data_ptr();
  a.routing = c.routing.data_ptr<int>();
  a.tokens = T;
  a.topK = k;
  a.hidden = H;
  a.inter = I;
  a.firstExpert = firstExpert;
  a.localExperts = E;
  return c;
}

}  // namespace

std::pair<at::Tensor, at::Tensor> moeSelect(const at::Tensor& logits, const MoeRouting& routing) {
  if (!selectable(logits, routing)) return {};
  const c10::cuda::CUDAGuard guard(logits.device());
  const at::Tensor lc = logits.contiguous();
  at::Tensor ids, weights;
  const kernels::MoeSelectArgs s = selectArgs(lc, routing, ids, weights);
  check(kernels::moeSelect(dtypeOf(lc), s, lc.size(0), routing.topK, streamOf(lc)), "moe_select");
  return {weights, ids};
}

at::Tensor fusedMoe(const at::Tensor& x, const at::Tensor& weights, const at::Tensor& ids,
                    const at::Tensor& w13, const at::Tensor& w2, int64_t firstExpert) {
  if (!usable(weights, x) || ids.scalar_type() != at::kLong || ids.dim() != 2) return {};
  const c10::cuda::CUDAGuard guard(x.device());
  MoeCall c = moeCall(x, ids.size(1), w13, w2, firstExpert);
  if (!c.y.defined()) return {};
  const at::Tensor idc = ids.contiguous(), wc = weights.contiguous();
  c.a.ids = idc.data_ptr<int64_t>();
  c.a.weights = wc.data_ptr();
  check(kernels::fusedMoe(c.a, streamOf(x)), "fused_moe");
  return c.y;
}

at::Tensor fusedMoe(const at::Tensor& x, const at::Tensor& routerLogits, const MoeRouting& routing,
                    const at::Tensor& w13, const at::Tensor& w2, int64_t firstExpert) {
  if (!selectable(routerLogits, routing) || !usable(routerLogits, x) ||
      routerLogits.size(0) != x.size(0))
    return {};
  const c10::cuda::CUDAGuard guard(x.device());
  MoeCall c = moeCall(x, routing.topK, w13, w2, firstExpert);
  if (!c.y.defined()) return {};
  const at::Tensor lc = routerLogits.contiguous();
  at::Tensor ids, weights;
  c.a.select = selectArgs(lc, routing, ids, weights);
  check(kernels::fusedMoe(c.a, streamOf(x)), "fused_moe");
  return c.y;
}

namespace {
// A call whose first kernel runs the router's GEMV (the fusedMoe overload from routerWeight);
// c.y undefined when the kernels do not take the shapes. The logits and the choice live in
// c.scratch until the launch.
MoeCall routerCall(const at::Tensor& x, const at::Tensor& routerWeight,
                   const at::Tensor& routerDone, const MoeRouting& routing, const at::Tensor& w13,
                   const at::Tensor& w2, int64_t firstExpert) {
  if (!usable(routerWeight, x) || routerWeight.dim() != 2 || !routerWeight.is_contiguous() ||
      x.dim() != 2 || x.size(0) > kernels::kMoeRouterMaxTokens ||
      routerWeight.size(1) != x.size(1) || routing.topK < 1 ||
      routing.topK > kernels::kMoeSelectMaxTopK || routerWeight.size(0) < routing.topK ||
      routerDone.scalar_type() != at::kInt || routerDone.device() != x.device())
    return {};
  MoeCall c = moeCall(x, routing.topK, w13, w2, firstExpert);
  if (!c.y.defined()) return {};
  const at::Tensor logits = at::empty({x.size(0), routerWeight.size(0)}, x.options());
  at::Tensor ids, weights;
  c.a.select = selectArgs(logits, routing, ids, weights);
  c.scratch = {logits, ids, weights};
  c.a.routerWeight = routerWeight.data_ptr();
  c.a.routerLogits = logits.data_ptr();
  c.a.routerDone = reinterpret_cast<unsigned*>(routerDone.data_ptr<int>());
  return c;
}
}  // namespace

at::Tensor fusedMoe(const at::Tensor& x, const at::Tensor& routerWeight,
                    const at::Tensor& routerDone, const MoeRouting& routing, const at::Tensor& w13,
                    const at::Tensor& w2, int64_t firstExpert) {
  if (!x.defined() || !x.is_cuda()) return {};
  const c10::cuda::CUDAGuard guard(x.device());
  MoeCall c = routerCall(x, routerWeight, routerDone, routing, w13, w2, firstExpert);
  if (!c.y.defined()) return {};
  check(kernels::fusedMoe(c.a, streamOf(x)), "fused_moe");
  return c.y;
}

std::pair<at::Tensor, at::Tensor> fusedMoeAfterNorm(const at::Tensor& x, const NormIn& norm,
                                                    const at::Tensor& routerWeight,
                                                    const at::Tensor& routerDone,
                                                    const MoeRouting& routing,
                                                    const at::Tensor& w13, const at::Tensor& w2,
                                                    int64_t firstExpert) {
  if (!RuntimeSwitches::current().fusedMoeNorm || !x.defined() || !x.is_cuda() || x.dim() != 2 ||
      !x.is_contiguous() || !aligned16(x) || !usable(norm.weight, x) || norm.weight.dim() != 1 ||
      norm.weight.size(0) != x.size(-1) || !norm.weight.is_contiguous() ||
      !aligned16(norm.weight) ||
      (norm.residual.defined() &&
       (!usable(norm.residual, x) || norm.residual.sizes() != x.sizes() ||
        !norm.residual.is_contiguous() || !aligned16(norm.residual))))
    return {};
  const int64_t H = x.size(-1);
  if (kernels::moeRouterSharedBytes(x.element_size(), x.size(0), H, w13.defined() ? w13.size(0) : 0,
                                    true) > kernels::kMoeRouterMaxShared)
    return {};
  const c10::cuda::CUDAGuard guard(x.device());
  MoeCall c = routerCall(x, routerWeight, routerDone, routing, w13, w2, firstExpert);
  if (!c.y.defined()) return {};
  const at::Tensor normed = at::empty_like(x);
  at::Tensor residualSum = norm.residual.defined() ? at::empty_like(x) : x;
  c.a.norm.x = x.data_ptr();
  c.a.norm.residual = norm.residual.defined() ? norm.residual.data_ptr() : nullptr;
  c.a.norm.normWeight = norm.weight.data_ptr();
  c.a.norm.residualOut = norm.residual.defined() ? residualSum.data_ptr() : nullptr;
  c.a.norm.k = H;
  c.a.norm.eps = float(norm.eps);
  c.a.normed = normed.data_ptr();
  check(kernels::fusedMoe(c.a, streamOf(x)), "fused_moe (after the norm)");
  return {c.y, residualSum};
}

at::Tensor moeCombine(const at::Tensor& down, const at::Tensor& rowOf, const at::Tensor& weights,
                      const at::Tensor& ids) {
  if (!usable(weights) || ids.scalar_type() != at::kLong || ids.dim() != 2 ||
      weights.sizes() != ids.sizes() || rowOf.scalar_type() != at::kLong ||
      rowOf.numel() != ids.numel() || rowOf.device() != ids.device() ||
      ids.device() != weights.device() || ids.size(1) < 1 ||
      ids.size(1) > kernels::kMoeCombineMaxTopK || down.dim() != 2 || !usable(down, weights))
    return {};
  const c10::cuda::CUDAGuard guard(weights.device());
  const at::Tensor dc = down.contiguous(), rc = rowOf.contiguous(), wc = weights.contiguous(),
                   ic = ids.contiguous();
  at::Tensor y = at::empty({ids.size(0), down.size(1)}, down.options());
  kernels::MoeCombineArgs a;
  a.dtype = dtypeOf(down);
  a.down = dc.data_ptr();
  a.rowOf = rc.data_ptr<int64_t>();
  a.weights = wc.data_ptr();
  a.ids = ic.data_ptr<int64_t>();
  a.y = y.data_ptr();
  a.tokens = ids.size(0);
  a.topK = ids.size(1);
  a.hidden = down.size(1);
  check(kernels::moeCombine(a, streamOf(down)), "moe_combine");
  return y;
}

}  // namespace shardscope::fused
