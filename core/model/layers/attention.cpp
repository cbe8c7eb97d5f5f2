#include "attention.h"

#include <cmath>

#include "../../error.h"
#ifdef SHARDSCOPE_WITH_CUDA_KERNELS
#include "../../kernels/fused_ops.h"
#include "../../runtime_switches.h"
#endif

namespace shardscope {

Attention::Attention(std::string name, Module* parent, int64_t layer, int64_t headsPerRank,
                     int64_t kvHeadsPerRank, int64_t headDim)
    : Module(std::move(name), parent),
      layer_(layer),
      heads_(headsPerRank),
      kvHeads_(kvHeadsPerRank),
      headDim_(headDim),
      scale_(1.0 / std::sqrt(double(headDim))) {
  setPorts(ShardSpec::split(ShardKind::Head), ShardSpec::split(ShardKind::Head));
}

at::Tensor Attention::attendSpan(const at::Tensor& q, const at::Tensor& keys,
                                 const at::Tensor& values, int64_t past) const {
  const int64_t n = q.size(0), L = keys.size(0), group = heads_ / kvHeads_;
#if TORCH_VERSION_MAJOR >= 2
  // On the GPU, fused attention (flash / memory-efficient) for a whole prompt (causal from 0) and
  // for one new token (sees every cached key); other shapes and the CPU take the explicit path,
  // which matches Hugging Face's eager softmax in fp32 bit for bit on the CPU.
  if (q.is_cuda() && (past == 0 || n == 1)) {
    at::Tensor qh = q.view({n, heads_, headDim_}).transpose(0, 1).unsqueeze(0);  // [1, h, n, d]
#if TORCH_VERSION_MAJOR > 2 || TORCH_VERSION_MINOR >= 5
    // The KV heads as they lie in the cache, [1, kv, L, d]: SDPA attends each query group to its
    // KV head itself (enable_gqa), where repeating them cost two copies of the keys and values.
    at::Tensor out = at::scaled_dot_product_attention(
        qh, keys.transpose(0, 1).unsqueeze(0), values.transpose(0, 1).unsqueeze(0), {}, 0.0,
        /*is_causal=*/n > 1, scale_, /*enable_gqa=*/true);
#else
    // KV heads repeated for their query group: [1, h, L, d].
    at::Tensor kh = keys.transpose(0, 1)
                        .unsqueeze(1)
                        .expand({kvHeads_, group, L, headDim_})
                        .reshape({1, heads_, L, headDim_});
    at::Tensor vh = values.transpose(0, 1)
                        .unsqueeze(1)
                        .expand({kvHeads_, group, L, headDim_})
                        .reshape({1, heads_, L, headDim_});
    at::Tensor out = at::scaled_dot_product_attention(qh, kh, vh, {}, 0.0,
                                                      /*is_causal=*/n > 1, scale_);
#endif
    return out.squeeze(0).transpose(0, 1).reshape({n, heads_ * headDim_});
  }
#endif
  at::Tensor qh = q.view({n, kvHeads_, group, headDim_}).permute({1, 2, 0, 3});  // [kv, g, n, d]
  at::Tensor kh = keys.permute({1, 2, 0}).unsqueeze(1);                          // [kv, 1, d, L]
  at::Tensor vh = values.permute({1, 0, 2}).unsqueeze(1);                        // [kv, 1, L, d]
  at::Tensor scores = at::matmul(qh, kh).mul_(scale_);                           // [kv, g, n, L]
  if (n > 1) {
    // Query i sits at position past + i and sees keys 0..past+i.
    at::Tensor rows = at::arange(n, scores.options().dtype(at::kLong)).unsqueeze(1) + past;
    at::Tensor cols = at::arange(L, scores.options().dtype(at::kLong)).unsqueeze(0);
    scores.masked_fill_(cols > rows, -std::numeric_limits<float>::infinity());
  }
  at::Tensor probs = at::softmax(scores, -1, at::kFloat).to(q.scalar_type());
  at::Tensor out = at::matmul(probs, vh);  // [kv, g, n, d]
  return out.permute({2, 0, 1, 3}).reshape({n, heads_ * headDim_});
}

#if TORCH_VERSION_MAJOR >= 2
// One new token for each of R requests: their k, v go into the shared cache in one scatter and
// all R attend in one call, each to its own length.
at::Tensor Attention::attendDecodeBatch(const at::Tensor& q, const at::Tensor& k,
                                        const at::Tensor& v, const ForwardBatch& batch) const {
  const int64_t R = int64_t(batch.spans.size());
  KvCache& cache = *batch.spans[0].cache;
  const at::Tensor& slots = batch.decodeSlots;
  const at::Tensor& past = batch.positions;  // where each request's new key goes
  cache.allKeys(layer_).index_put_({slots, past}, k.view({R, kvHeads_, headDim_}));
  cache.allValues(layer_).index_put_({slots, past}, v.view({R, kvHeads_, headDim_}));
  return attendCached(q, batch);
}

at::Tensor Attention::attendCached(const at::Tensor& q, const ForwardBatch& batch) const {
  const int64_t R = int64_t(batch.spans.size()), group = heads_ / kvHeads_;
  KvCache& cache = *batch.spans[0].cache;
  const int64_t span = batch.decodeSpan;  // the generation loop checked it against the capacity
  const at::Tensor& slots = batch.decodeSlots;
#ifdef SHARDSCOPE_WITH_CUDA_KERNELS
  // Flash-decoding over each request's own length: one small kernel where SDPA needs a mask.
  at::Tensor kernelOut =
      fused::decodeAttention(q.contiguous(), cache.allKeys(layer_), cache.allValues(layer_), slots,
                             batch.positions, kvHeads_, span, scale_);
  if (kernelOut.defined()) return kernelOut;
#endif
  const auto window = [&](const at::Tensor& all) {  // [R, kvHeads, span, d], a view when it can
    at::Tensor rows = batch.decodeSlotsInOrder ? all.narrow(0, 0, R) : all.index_select(0, slots);
    return rows.narrow(1, 0, span).permute({0, 2, 1, 3});
  };
  // Grouped-query attention without repeating keys: the `group` query heads that share a KV head
  // (head h reads KV head h / group, as transformers' repeat_kv) are the rows of one query block;
  // with one token per request the rows are independent and share the request's mask, which
  // hides the keys past each request's own position.
  at::Tensor mask =
      (at::arange(span, batch.positions.options()).unsqueeze(0) <= batch.positions.unsqueeze(1))
          .view({R, 1, 1, span});
  at::Tensor out = at::scaled_dot_product_attention(
      q.view({R, kvHeads_, group, headDim_}), window(cache.allKeys(layer_)),
      window(cache.allValues(layer_)), mask, 0.0, /*is_causal=*/false, scale_);
  return out.reshape({R, heads_ * headDim_});
}
#endif

#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 5)
namespace {
// R > 1 prompts of one length, all from position 0, their rows in request order, in consecutive
// slots of one cache: an activation-patching trace's clean and corrupted prompts, a sweep's.
bool equalFreshPrompts(const std::vector<SequenceSpan>& spans) {
  if (spans.size() < 2) return false;
  const SequenceSpan& first = spans[0];
  for (size_t i = 0; i < spans.size(); ++i) {
    const SequenceSpan& s = spans[i];
    if (s.pastLength != 0 || s.tokenCount != first.tokenCount || s.cache != first.cache ||
        s.tokenStart != int64_t(i) * first.tokenCount || s.slot != first.slot + int64_t(i))
      return false;
  }
  return true;
}

// SHARDSCOPE_BATCH_PROMPT_ATTENTION=0 keeps the loop over requests (to compare).
bool promptAttentionBatched() {
  return RuntimeSwitches::current().batchPromptAttention;
}
}  // namespace
#endif

at::Tensor Attention::attendEqualPrompts(const at::Tensor& q, const at::Tensor& k,
                                         const at::Tensor& v, const ForwardBatch& batch) const {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 5)
  // The CPU keeps the loop: its explicit path matches Hugging Face's eager softmax bit for bit.
  if (!q.is_cuda() || !promptAttentionBatched() || !equalFreshPrompts(batch.spans)) return {};
  const int64_t R = int64_t(batch.spans.size()), n = batch.spans[0].tokenCount;
  const SequenceSpan& first = batch.spans[0];
  SS_ASSERT(first.cache && n <= first.cache->capacity(), path() + ": request outgrew its KV cache");
  // [R, n, kv, d] views of the slots' first n positions; attention reads them back as the loop
  // does (in the cache's dtype).
  const auto rows = [&](const at::Tensor& all) {
    return all.narrow(0, first.slot, R).narrow(1, 0, n);
  };
  at::Tensor keys = rows(first.cache->allKeys(layer_)),
             values = rows(first.cache->allValues(layer_));
  keys.copy_(k.view({R, n, kvHeads_, headDim_}));
  values.copy_(v.view({R, n, kvHeads_, headDim_}));
  at::Tensor out = at::scaled_dot_product_attention(
      q.view({R, n, heads_, headDim_}).transpose(1, 2), keys.transpose(1, 2),
      values.transpose(1, 2), {}, 0.0, /*is_causal=*/n > 1, scale_, /*enable_gqa=*/true);
  return out.transpose(1, 2).reshape({R * n, heads_ * headDim_});  // [R, h, n, d] -> rows
#else
  (void)q, (void)k, (void)v, (void)batch;
  return {};
#endif
}

at::Tensor Attention::forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                              const ForwardBatch& batch) const {
  PortValue in = PortValue::single(q);
  batch.visit(*this, PortRole::Input, in);
  const at::Tensor& query = in.items[0];
#if TORCH_VERSION_MAJOR >= 2
  if (query.is_cuda() && batch.decodeSlots.defined()) {
    PortValue out = PortValue::single(attendDecodeBatch(query, k, v, batch));
    batch.visit(*this, PortRole::Output, out);
    return out.items[0];
  }
#endif
  if (at::Tensor together = attendEqualPrompts(query, k, v, batch); together.defined()) {
    PortValue out = PortValue::single(together);
    batch.visit(*this, PortRole::Output, out);
    return out.items[0];
  }
  std::vector<at::Tensor> outs;
  outs.reserve(batch.spans.size());
  for (const SequenceSpan& s : batch.spans) {
    SS_ASSERT(s.cache && s.pastLength + s.tokenCount <= s.cache->capacity(),
              path() + ": request outgrew its KV cache");
    at::Tensor keys = s.cache->keys(layer_, s.slot);
    at::Tensor values = s.cache->values(layer_, s.slot);
    keys.narrow(0, s.pastLength, s.tokenCount)
        .copy_(k.narrow(0, s.tokenStart, s.tokenCount).view({s.tokenCount, kvHeads_, headDim_}));
    values.narrow(0, s.pastLength, s.tokenCount)
        .copy_(v.narrow(0, s.tokenStart, s.tokenCount).view({s.tokenCount, kvHeads_, headDim_}));
    const int64_t L = s.pastLength + s.tokenCount;
    outs.push_back(attendSpan(query.narrow(0, s.tokenStart, s.tokenCount), keys.narrow(0, 0, L),
                              values.narrow(0, 0, L), s.pastLength));
  }
  PortValue out = PortValue::single(outs.size() == 1 ? outs[0] : at::cat(outs, 0));
  batch.visit(*this, PortRole::Output, out);
  return out.items[0];
}

}  // namespace shardscope
