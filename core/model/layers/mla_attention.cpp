#include "mla_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

#include "../../error.h"
#include "../../parallel/collective_board.h"
#include "deepseek_scaling_rotary_embedding.h"
#include "linear.h"

namespace shardscope {
namespace {

// Positions [0, end) held by group rank `r` of `dcp` (every dcp-th from r): how many.
int64_t heldBefore(int64_t end, int64_t r, int64_t dcp) {
  return end > r ? (end - r + dcp - 1) / dcp : 0;
}

double softmaxScale(const ModelConfig& c) {
  double scale = 1.0 / std::sqrt(double(c.mla.qkHeadDim()));
  const RopeScaling& y = c.ropeScaling;
  if (y.type != RopeType::Default && y.mscaleAllDim != 0.0) {
    const double m = yarnMscale(y.factor, y.mscaleAllDim);
    scale *= m * m;
  }
  return scale;
}

// Softmax of the scores over the last dimension in fp32 and its log-sum-exp, safe where every key
// is masked (probabilities 0, lse -inf): a DCP rank's partial result.
std::pair<at::Tensor, at::Tensor> softmaxAndLse(const at::Tensor& scores) {
  const at::Tensor s32 = scores.to(at::kFloat);
  at::Tensor m = std::get<0>(s32.max(-1, true));
  m = m.masked_fill(at::isinf(m), 0.0);
  const at::Tensor p = (s32 - m).exp();
  const at::Tensor sum = p.sum(-1, true);
  return {p / at::where(sum > 0, sum, at::ones_like(sum)), (m + sum.log()).squeeze(-1)};
}

}  // namespace

MLAAttention::MLAAttention(std::string name, Module* parent, int64_t layer, const ModelConfig& c,
                           TpRank tp)
    : Module(std::move(name), parent),
      layer_(layer),
      headsPerRank_(c.numHeads / tp.size),
      nope_(c.mla.qkNopeHeadDim),
      rope_(c.mla.qkRopeHeadDim),
      v_(c.mla.vHeadDim),
      kvLora_(c.mla.kvLoraRank),
      scale_(softmaxScale(c)),
      tp_(tp) {
  setPorts(ShardSpec::split(ShardKind::Head, 1, tp.dcp), ShardSpec::split(ShardKind::Head));
}

void MLAAttention::writeCache(const SequenceSpan& s, const at::Tensor& entries) const {
  const int64_t dcp = tp_.dcp, r = tp_.rank % dcp;
  const int64_t first = heldBefore(s.pastLength, r, dcp);
  const int64_t end = heldBefore(s.pastLength + s.tokenCount, r, dcp);
  SS_ASSERT(s.cache && end <= s.cache->capacity(), path() + ": request outgrew its KV cache");
  if (end == first) return;
  // Local slot j holds position j * dcp + r, row (j * dcp + r - past) of the span's new tokens.
  const at::Tensor slots = at::arange(first, end, entries.options().dtype(at::kLong));
  const at::Tensor rows = slots * dcp + (r - s.pastLength);
  s.cache->keys(layer_, s.slot).squeeze(1).index_copy_(0, slots, entries.index_select(0, rows));
}

std::pair<at::Tensor, at::Tensor> MLAAttention::attendSpan(const SequenceSpan& s,
                                                           const at::Tensor& q,
                                                           const at::Tensor& kvNew,
                                                           const at::Tensor& kvB) const {
  const int64_t dcp = tp_.dcp, r = tp_.rank % dcp, n = s.tokenCount, gh = groupHeads();
  const int64_t past = s.pastLength, held = heldBefore(past + n, r, dcp);
  const auto floatOptions = q.options().dtype(at::kFloat);
  if (held == 0) {  // under DCP a rank may hold none of a short prompt's tokens
    return {at::zeros({n, gh, v_}, q.options()),
            at::full({n, gh}, -std::numeric_limits<float>::infinity(), floatOptions)};
  }
  const at::Tensor entries = s.cache->keys(layer_, s.slot).squeeze(1).narrow(0, 0, held);
  // Keys without position and values from the latent; the step's own from kv_b_proj's output.
  at::Tensor kv = linearForward(entries.narrow(-1, 0, kvLora_), kvB).view({held, gh, nope_ + v_});
  const int64_t first = heldBefore(past, r, dcp);
  if (held > first) {
    const at::Tensor slots = at::arange(first, held, q.options().dtype(at::kLong));
    kv.index_copy_(0, slots,
                   kvNew.reshape({n, gh, nope_ + v_}).index_select(0, slots * dcp + (r - past)));
  }
  const at::Tensor kPe = entries.narrow(-1, kvLora_, rope_).unsqueeze(1).expand({held, gh, rope_});
  const at::Tensor keys = at::cat({kv.narrow(-1, 0, nope_), kPe}, -1);    // [held, gh, nope+rope]
  const at::Tensor values = kv.narrow(-1, nope_, v_).permute({1, 0, 2});  // [gh, held, v]
  at::Tensor scores =
      at::matmul(q.permute({1, 0, 2}), keys.permute({1, 2, 0})).mul_(scale_);  // [gh, n, held]
  // Query i sits at position past + i; local key j at position j * dcp + r.
  const auto longOptions = q.options().dtype(at::kLong);
  const at::Tensor queryPos = at::arange(n, longOptions).unsqueeze(1) + past;
  const at::Tensor keyPos = at::arange(held, longOptions).unsqueeze(0) * dcp + r;
  scores.masked_fill_(keyPos > queryPos, -std::numeric_limits<float>::infinity());
  if (dcp == 1) {  // HF's eager arithmetic: softmax in fp32, cast back
    const at::Tensor probs = at::softmax(scores, -1, at::kFloat).to(q.scalar_type());
    return {at::matmul(probs, values).permute({1, 0, 2}), at::Tensor()};
  }
  auto [probs, lse] = softmaxAndLse(scores);  // lse [gh, n]
  const at::Tensor out = at::matmul(probs.to(q.scalar_type()), values);
  return {out.permute({1, 0, 2}), lse.transpose(0, 1)};
}

void MLAAttention::writeDecodeCache(const at::Tensor& entries, const ForwardBatch& batch) const {
  const int64_t R = entries.size(0), dcp = tp_.dcp;
  const at::Tensor& all = batch.spans[0].cache->allKeys(layer_);  // [requests, capacity, 1, d]
  const at::Tensor value = entries.reshape({R, 1, entries.size(-1)});
  const at::Tensor& slots = batch.decodeSlots;
  if (dcp == 1) {
    all.index_put_({slots, batch.positions}, value);
    return;
  }
  // Position p lies on group rank p % dcp at local slot p / dcp; the other ranks write back what
  // that slot holds, so every rank runs the same kernels and nothing is decided on the host.
  const at::Tensor local = at::div(batch.positions, dcp, "trunc");
  const at::Tensor mine = (batch.positions.remainder(dcp) == tp_.rank % dcp).view({R, 1, 1});
  all.index_put_({slots, local}, at::where(mine, value, all.index({slots, local})));
}

at::Tensor MLAAttention::decodeEntries(const ForwardBatch& batch) const {
  const int64_t R = batch.decodeSlots.size(0), dcp = tp_.dcp;
  const KvCache& cache = *batch.spans[0].cache;
  const int64_t span = std::min(cache.capacity(), (batch.decodeSpan + dcp - 1) / dcp);
  const at::Tensor& all = cache.allKeys(layer_);
  const at::Tensor rows =
      batch.decodeSlotsInOrder ? all.narrow(0, 0, R) : all.index_select(0, batch.decodeSlots);
  return rows.narrow(1, 0, span).squeeze(2);
}

std::pair<at::Tensor, at::Tensor> MLAAttention::decodeProbabilities(
    at::Tensor scores, const ForwardBatch& batch) const {
  const int64_t dcp = tp_.dcp, r = tp_.rank % dcp;
  const at::Tensor keyPos = at::arange(scores.size(-1), batch.positions.options()) * dcp + r;
  const at::Tensor unseen = keyPos.unsqueeze(0) > batch.positions.unsqueeze(1);  // [R, keys]
  scores.masked_fill_(unseen.unsqueeze(1), -std::numeric_limits<float>::infinity());
  if (dcp == 1) return {at::softmax(scores, -1, at::kFloat), at::Tensor()};  // HF's arithmetic
  return softmaxAndLse(scores);                                              // lse [R, gh]
}

std::pair<at::Tensor, at::Tensor> MLAAttention::attendLatent(const at::Tensor& q,
                                                             const at::Tensor& kvB,
                                                             const ForwardBatch& batch) const {
  const int64_t gh = groupHeads();
  const at::Tensor entries = decodeEntries(batch);           // [R, span, kv_lora + rope]
  const at::Tensor w = kvB.view({gh, nope_ + v_, kvLora_});  // per head [W_UK; W_UV]
  // q_nope,h W_UK,h: [gh, R, nope] x [gh, nope, kv_lora]; then the rope part beside it.
  const at::Tensor qLatent =
      at::bmm(q.narrow(-1, 0, nope_).transpose(0, 1), w.narrow(1, 0, nope_)).transpose(0, 1);
  const at::Tensor query = at::cat({qLatent, q.narrow(-1, nope_, rope_)}, -1);
  auto [probs, lse] = decodeProbabilities(at::bmm(query, entries.transpose(1, 2)).mul_(scale_),
                                          batch);  // [R, gh, span]
  const at::Tensor latentOut =
      at::bmm(probs.to(q.scalar_type()), entries.narrow(-1, 0, kvLora_));  // [R, gh, kv_lora]
  // o_h = latentOut_h W_UV,h^T: [gh, R, kv_lora] x [gh, kv_lora, v].
  const at::Tensor out = at::bmm(latentOut.transpose(0, 1), w.narrow(1, nope_, v_).transpose(1, 2));
  return {out.transpose(0, 1), lse};
}

std::pair<at::Tensor, at::Tensor> MLAAttention::attendExpandedDecode(
    const at::Tensor& q, const at::Tensor& kvNew, const at::Tensor& kvB,
    const ForwardBatch& batch) const {
  const int64_t R = q.size(0), gh = groupHeads(), dcp = tp_.dcp, r = tp_.rank % dcp;
  const at::Tensor entries = decodeEntries(batch);  // [R, span, kv_lora + rope]
  const int64_t span = entries.size(1);
  at::Tensor kv =
      linearForward(entries.narrow(-1, 0, kvLora_), kvB).view({R, span, gh, nope_ + v_});
  // Each request's own token, on the group rank that holds its position, as kv_b_proj gave it.
  const at::Tensor requests = at::arange(R, batch.positions.options());
  const at::Tensor local = at::div(batch.positions, dcp, "trunc");
  const at::Tensor own = kvNew.reshape({R, gh, nope_ + v_});
  const at::Tensor mine = (batch.positions.remainder(dcp) == r).view({R, 1, 1});
  kv.index_put_({requests, local},
                dcp == 1 ? own : at::where(mine, own, kv.index({requests, local})));
  const at::Tensor kPe =
      entries.narrow(-1, kvLora_, rope_).unsqueeze(2).expand({R, span, gh, rope_});
  const at::Tensor keys = at::cat({kv.narrow(-1, 0, nope_), kPe}, -1);  // [R, span, gh, nope+rope]
  const at::Tensor values = kv.narrow(-1, nope_, v_).permute({0, 2, 1, 3});  // [R, gh, span, v]
  // [R, gh, 1, nope+rope] x [R, gh, nope+rope, span]
  at::Tensor scores = at::matmul(q.unsqueeze(2), keys.permute({0, 2, 3, 1})).squeeze(2);
  auto [probs, lse] = decodeProbabilities(scores.mul_(scale_), batch);  // [R, gh, span]
  const at::Tensor out = at::matmul(probs.to(q.scalar_type()).unsqueeze(2), values).squeeze(2);
  return {out, lse};
}

at::Tensor MLAAttention::finish(const at::Tensor& out, const at::Tensor& lse,
                                const ForwardBatch& batch) const {
  if (tp_.dcp == 1) return out.reshape({out.size(0), headsPerRank_ * v_});
  return combine(out, lse, batch);
}

at::Tensor MLAAttention::groupColumns(const at::Tensor& x, const ForwardBatch& batch) const {
  if (tp_.dcp == 1) return x;
  CollectiveSite site(path(), batch.step);
  const at::Tensor all = batch.group.allGather(x.contiguous(), -1);  // every rank's heads in order
  const int64_t perRank = x.size(-1);
  return all.narrow(-1, (tp_.rank / tp_.dcp) * tp_.dcp * perRank, tp_.dcp * perRank);
}

at::Tensor MLAAttention::combine(const at::Tensor& out, const at::Tensor& lse,
                                 const ForwardBatch& batch) const {
  const int64_t T = out.size(0), dcp = tp_.dcp;
  at::Tensor all;
  {
    CollectiveSite site(path(), batch.step);
    const at::Tensor packed = at::cat({out.to(at::kFloat), lse.unsqueeze(-1)}, -1).unsqueeze(0);
    all = batch.group.allGather(packed.contiguous(), 0);  // [tp, T, gh, v + 1]
  }
  const at::Tensor group = all.narrow(0, (tp_.rank / dcp) * dcp, dcp);
  const at::Tensor outs = group.narrow(-1, 0, v_), lses = group.select(-1, v_);  // [dcp, T, gh]
  // Position 0 lies on the group's first rank and every query sees it: the maximum is finite.
  const at::Tensor w = (lses - std::get<0>(lses.max(0, true))).exp();
  const at::Tensor whole = (outs * w.unsqueeze(-1)).sum(0) / w.sum(0).unsqueeze(-1);
  return whole.narrow(1, (tp_.rank % dcp) * headsPerRank_, headsPerRank_)
      .reshape({T, headsPerRank_ * v_})
      .to(out.scalar_type());
}

at::Tensor MLAAttention::forward(const at::Tensor& q, const at::Tensor& latent,
                                 const at::Tensor& kPe, const at::Tensor& kv, const at::Tensor& kvB,
                                 const ForwardBatch& batch) const {
  PortValue in = PortValue::single(q);
  batch.visit(*this, PortRole::Input, in);
  const at::Tensor& query = in.items[0];
  const at::Tensor entries = at::cat({latent, kPe}, -1);  // [T, kv_lora + rope]
  const at::Tensor kvGroup = groupColumns(kv, batch);
  at::Tensor out, lse;  // [T, gh, v] and, under DCP, [T, gh]
  if (batch.decodeSlots.defined()) {
    writeDecodeCache(entries, batch);
    std::tie(out, lse) = attendExpandedDecode(query, kvGroup, kvB, batch);
  } else {
    std::vector<at::Tensor> outs, lses;
    for (const SequenceSpan& s : batch.spans) {
      writeCache(s, entries.narrow(0, s.tokenStart, s.tokenCount));
      auto [o, l] = attendSpan(s, query.narrow(0, s.tokenStart, s.tokenCount),
                               kvGroup.narrow(0, s.tokenStart, s.tokenCount), kvB);
      outs.push_back(o);
      lses.push_back(l);
    }
    out = outs.size() == 1 ? outs[0] : at::cat(outs, 0);
    if (tp_.dcp > 1) lse = lses.size() == 1 ? lses[0] : at::cat(lses, 0);
  }
  PortValue o = PortValue::single(finish(out, lse, batch));
  batch.visit(*this, PortRole::Output, o);
  return o.items[0];
}

at::Tensor MLAAttention::forwardAbsorbed(const at::Tensor& q, const at::Tensor& latent,
                                         const at::Tensor& kPe, const at::Tensor& kvB,
                                         const ForwardBatch& batch) const {
  SS_ASSERT(batch.decodeSlots.defined() && !batch.spans.empty() && batch.spans[0].cache,
            path() + ": the latent-space attention runs decode steps only");
  PortValue in = PortValue::single(q);
  batch.visit(*this, PortRole::Input, in);
  writeDecodeCache(at::cat({latent, kPe}, -1), batch);
  auto [out, lse] = attendLatent(in.items[0], kvB, batch);
  PortValue o = PortValue::single(finish(out, lse, batch));
  batch.visit(*this, PortRole::Output, o);
  return o.items[0];
}

}  // namespace shardscope
