#include "grouped_experts.h"

#include <torch/version.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "linear.h"

#ifdef SHARDSCOPE_WITH_CUDA_KERNELS
#include "../../kernels/fused_ops.h"
#endif

// 2.8 has at::_grouped_mm for Hopper only; from 2.9 it runs (more slowly) on other GPUs too.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 9)
#define SHARDSCOPE_RAGGED_EXPERT_GEMM 1
#endif

namespace shardscope {
namespace {

// silu(gate) * up of [rows, 2I] ([gate | up] columns); one kernel on the GPU (the same bits).
at::Tensor swiGlu(const at::Tensor& gateUp, int64_t I) {
#ifdef SHARDSCOPE_WITH_CUDA_KERNELS
  if (fused::usable(gateUp)) return fused::siluAndMul(gateUp);
#endif
  return at::silu(gateUp.narrow(-1, 0, I)) * gateUp.narrow(-1, I, I);
}

// The rows of one matmul a local expert: [rows, H] sorted by expert, `ends` [localE] int32 the
// end of each expert's rows; returns silu(gate) * up, then its down projection: [rows, H].
at::Tensor raggedExperts(const at::Tensor& rows, const at::Tensor& ends, const at::Tensor& w13,
                         const at::Tensor& w2) {
#ifdef SHARDSCOPE_RAGGED_EXPERT_GEMM
  const int64_t I = w2.size(2);
  const at::Tensor h = swiGlu(at::_grouped_mm(rows, w13.transpose(1, 2), ends), I);
  return at::_grouped_mm(h, w2.transpose(1, 2), ends);
#else
  (void)rows, (void)ends, (void)w13, (void)w2;
  return {};
#endif
}

// y [T, H]: each token's choices summed in increasing expert order, each add rounded, as HF's
// index_add_ over experts (other ranks' experts add zero, which changes nothing). Pair pairs[i]'s
// expert output is row position[i] of down, or none (another rank's expert) where it is -1; down
// is undefined when no pair is this rank's.
at::Tensor combineRows(const at::Tensor& down, const at::Tensor& pairs, const at::Tensor& position,
                       const at::Tensor& weights, const at::Tensor& ids, const at::Tensor& x) {
  const int64_t T = ids.size(0), k = ids.size(1), H = x.size(1);
#ifdef SHARDSCOPE_WITH_CUDA_KERNELS
  if (fused::usable(x)) {  // one kernel where ATen runs a multiply, a copy, a gather and k adds
    at::Tensor rowOf = at::full({T * k}, -1, ids.options());
    if (down.defined()) rowOf.index_copy_(0, pairs, position);
    const at::Tensor rows = down.defined() ? down : at::empty({0, H}, x.options());
    if (at::Tensor y = fused::moeCombine(rows, rowOf, weights, ids); y.defined()) return y;
  }
#endif
  at::Tensor perPair = at::zeros({T * k, H}, x.options());
  if (down.defined()) {
    at::Tensor weighted = down.index_select(0, position.clamp_min(0)) *
                          weights.reshape(-1).index_select(0, pairs).unsqueeze(1);
    weighted.masked_fill_(position.lt(0).unsqueeze(1), 0);
    perPair.index_copy_(0, pairs, weighted);
  }
  const at::Tensor byExpert = std::get<1>(ids.sort(1));
  const at::Tensor choices = perPair.view({T, k, H});
  const at::Tensor ordered = choices.gather(1, byExpert.unsqueeze(-1).expand({T, k, H}));
  at::Tensor y = ordered.select(1, 0).clone();
  for (int64_t j = 1; j < k; ++j) y.add_(ordered.select(1, j));
  return y;
}

// The local pairs of a batch: the (token, choice) pairs of this rank's experts, sorted by expert
// (stable: tokens stay in order within an expert), with each local expert's count. One host read
// of the counts sizes them.
struct LocalPairs {
  at::Tensor pairs;            // [local] indices into ids.reshape(-1); undefined when local is 0
  at::Tensor experts;          // [local] their expert ids
  std::vector<int64_t> count;  // [localE] pairs a local expert has
  int64_t widest = 0;          // the busiest local expert's count
};

LocalPairs localPairs(const at::Tensor& ids, int64_t firstExpert, int64_t localExperts,
                      int64_t numExperts) {
  const at::Tensor flat = ids.reshape(-1);
  auto [sortedIds, order] = flat.sort(c10::optional<bool>(true), 0);
  const at::Tensor hostCounts = at::bincount(flat, {}, numExperts).to(at::kCPU);
  const int64_t* count = hostCounts.data_ptr<int64_t>();
  LocalPairs out;
  int64_t offset = 0, local = 0;
  for (int64_t e = 0; e < firstExpert; ++e) offset += count[e];
  for (int64_t e = firstExpert; e < firstExpert + localExperts; ++e) {
    out.count.push_back(count[e]);
    local += count[e];
    out.widest = std::max(out.widest, count[e]);
  }
  if (local == 0) return out;
  out.pairs = order.narrow(0, offset, local);
  out.experts = sortedIds.narrow(0, offset, local);
  return out;
}

// Every local expert's rows as one padded batch [localE, widest, H]: two batched matmuls instead
// of a loop of small ones (a prefill's 128 experts made 900 launches a layer on the GPU). Returns
// the experts' outputs in the order of p.pairs.
at::Tensor paddedExperts(const at::Tensor& rows, const LocalPairs& p, const at::Tensor& w13,
                         const at::Tensor& w2, int64_t firstExpert) {
  const int64_t H = rows.size(1), I = w2.size(2), localExperts = w13.size(0);
  const at::Tensor counts = at::tensor(p.count, p.experts.options());
  const at::Tensor starts = counts.cumsum(0) - counts;
  const at::Tensor e = p.experts - firstExpert;
  const int64_t local = rows.size(0);
  const at::Tensor slot = at::arange(local, p.experts.options()) - starts.index_select(0, e);
  at::Tensor batched = at::zeros({localExperts, p.widest, H}, rows.options());
  batched.index_put_({e, slot}, rows);
  const at::Tensor h = swiGlu(at::bmm(batched, w13.transpose(1, 2)), I);
  return at::bmm(h, w2.transpose(1, 2)).index({e, slot});
}

// Each chosen local expert's rows through its two matmuls, one expert after another: only the
// chosen experts' weights are read (a decode step's k of them), and one row takes the GEMV.
at::Tensor expertByExpert(const at::Tensor& rows, const LocalPairs& p, const at::Tensor& w13,
                          const at::Tensor& w2) {
  const int64_t I = w2.size(2);
  at::Tensor down = at::empty_like(rows);
  int64_t start = 0;
  for (size_t e = 0; e < p.count.size(); ++e) {
    const int64_t n = p.count[e];
    if (n == 0) continue;
    const at::Tensor h = swiGlu(linearForward(rows.narrow(0, start, n), w13.select(0, long(e))), I);
    down.narrow(0, start, n).copy_(linearForward(h, w2.select(0, long(e))));
    start += n;
  }
  return down;
}

}  // namespace

bool raggedExpertGemm(const at::Tensor& x, const at::Tensor& w2) {
#ifdef SHARDSCOPE_RAGGED_EXPERT_GEMM
  // _grouped_mm needs rows of 16-byte multiples: H and I a multiple of 8 in bf16.
  return x.is_cuda() && x.scalar_type() == at::kBFloat16 && x.size(1) % 8 == 0 &&
         w2.size(2) % 8 == 0;
#else
  (void)x, (void)w2;
  return false;
#endif
}

at::Tensor groupedExperts(const at::Tensor& x, const at::Tensor& weights, const at::Tensor& ids,
                          const at::Tensor& w13, const at::Tensor& w2, int64_t firstExpert,
                          int64_t numExperts, ExpertGemm gemm) {
  const int64_t T = x.size(0), k = ids.size(1);
  const int64_t localExperts = w13.size(0);
  if (T == 0) return at::zeros_like(x);
  if (gemm == ExpertGemm::Auto && raggedExpertGemm(x, w2)) {
    // No host read: a read of the counts would leave the GPU idle while the host launches the
    // rest of the layer. This rank's experts sort first (key: the id less firstExpert, modulo the
    // expert count; 16-bit keys take two radix passes where int64 ids take eight), each local
    // expert's end in the sorted pairs is the number of keys up to it, and the grouped GEMM stops
    // at the last local end: the other ranks' pairs after it are gathered but not multiplied,
    // and the combine reads them as zero rows.
    const at::ScalarType type = numExperts <= INT16_MAX ? at::kShort : at::kLong;
    const at::Tensor flat = ids.reshape(-1);
    const at::Tensor keys = firstExpert == 0 ? flat : (flat - firstExpert).remainder(numExperts);
    auto [sortedKeys, byExpert] = keys.to(type).sort(c10::optional<bool>(true), 0);
    const at::Tensor ends = at::searchsorted(
        sortedKeys, at::arange(1, localExperts + 1, sortedKeys.options()), /*out_int32=*/true);
    const at::Tensor rows = x.index_select(0, at::div(byExpert, k, "trunc"));
    const at::Tensor down = raggedExperts(rows, ends, w13, w2);
    at::Tensor position = at::arange(T * k, byExpert.options());
    if (localExperts < numExperts)
      position.masked_fill_(position >= ends.narrow(0, localExperts - 1, 1), -1);
    return combineRows(down, byExpert, position, weights, ids, x);
  }
  // Padded or ExpertByExpert: this rank's experts' share, sized by one host read of the counts.
  const LocalPairs p = localPairs(ids, firstExpert, localExperts, numExperts);
  if (!p.pairs.defined()) return combineRows({}, {}, {}, weights, ids, x);
  const at::Tensor rows = x.index_select(0, at::div(p.pairs, k, "trunc"));
  const bool byExpert =
      gemm == ExpertGemm::ExpertByExpert || (gemm == ExpertGemm::Auto && x.is_cpu());
  const at::Tensor down =
      byExpert ? expertByExpert(rows, p, w13, w2) : paddedExperts(rows, p, w13, w2, firstExpert);
  return combineRows(down, p.pairs, at::arange(rows.size(0), p.pairs.options()), weights, ids, x);
}

}  // namespace shardscope
