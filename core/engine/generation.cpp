#include "generation.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <utility>

#include "../error.h"
#include "../host_tensor_conversion.h"
#include "../model/tokenizer.h"
#include "../parallel/collective_board.h"
#include "pipeline_step.h"
#include "sampler.h"

namespace shardscope {
namespace {

struct Sequence {
  std::vector<int64_t> tokens;  // prompt then generated
  int64_t promptLength = 0;
  int64_t cached = 0;  // tokens already in the KV cache
  bool finished = false;
  std::string finishReason;
  std::vector<at::Tensor> logits;  // rank 0, when asked for: one [V] float row per step
};

// Keys a decode step may attend over: the longest request's, rounded up so that CUDA graphs
// recorded for one span serve many steps (each request still stops at its own position).
constexpr int64_t kSpanGranule = 128;

// A pure decode step: batched attention over the shared cache, its slots and span (in positions:
// under decode-context parallelism a rank holds 1/tokenShards of them) built once for all layers.
void prepareDecode(const KvCache& cache, const KvCacheLayout& layout,
                   const std::vector<int64_t>& slots, const std::vector<int64_t>& past,
                   at::Tensor deviceSlots, ForwardBatch& batch) {
  const int64_t longest = *std::max_element(past.begin(), past.end()) + 1;
  const int64_t positions = cache.capacity() * layout.tokenShards;
  SS_ASSERT(longest <= positions, "a request outgrew its KV cache");
  const int64_t requests = int64_t(slots.size());
  batch.decodeSlots = std::move(deviceSlots);
  batch.decodeSlotsInOrder = true;
  for (int64_t i = 0; i < requests; ++i) batch.decodeSlotsInOrder &= slots[size_t(i)] == i;
  batch.decodeSpan =
      std::min(positions, (longest + kSpanGranule - 1) / kSpanGranule * kSpanGranule);
}

// Whether the request's generated text now contains one of its stop strings. Every rank decides
// alike: the ids are the same on every rank, and so is their text.
bool containsStopString(const GenerateRequest& request, const Sequence& s) {
  if (request.sampling.stop.empty()) return false;
  const std::vector<int64_t> generated(s.tokens.begin() + s.promptLength, s.tokens.end());
  const std::string text = request.tokenizer->decode(generated, /*skipSpecialTokens=*/true);
  for (const std::string& stop : request.sampling.stop) {
    if (text.find(stop) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

std::string completionText(const Tokenizer* tokenizer, const std::vector<int64_t>& ids,
                           const std::vector<std::string>& stop, TextForm form) {
  if (!tokenizer) return "";
  std::string text = form == TextForm::Display
                         ? tokenizer->displayText(ids, /*skipSpecialTokens=*/true)
                         : tokenizer->decode(ids, /*skipSpecialTokens=*/true);
  size_t cut = text.size();
  for (const std::string& s : stop) cut = std::min(cut, text.find(s));
  return text.substr(0, cut);
}

void validateRequest(const GenerateRequest& request, const ModelConfig& config) {
  if (request.prompts.empty()) throw Error("generate: no prompts given");
  if (!request.sampling.stop.empty() && !request.tokenizer)
    throw Error(
        "stop strings need the model's tokenizer, and this model has no tokenizer.json; "
        "use stop_token_ids instead");
  for (const std::string& s : request.sampling.stop) {
    if (s.empty()) throw Error("a stop string must not be empty");
  }
  if (request.sampling.maxTokens < 1) {
    throw Error("max_tokens must be at least 1, got " + std::to_string(request.sampling.maxTokens));
  }
  if (request.sampling.topP <= 0.0 || request.sampling.topP > 1.0) {
    throw Error("top_p must be in (0, 1], got " + std::to_string(request.sampling.topP));
  }
  if (request.sampling.temperature < 0.0) throw Error("temperature must not be negative");
  for (size_t r = 0; r < request.prompts.size(); ++r) {
    const auto& p = request.prompts[r];
    if (p.empty()) throw Error("prompt " + std::to_string(r) + " has no tokens");
    for (int64_t id : p) {
      if (id < 0 || id >= config.vocabSize) {
        throw Error("prompt " + std::to_string(r) + " holds token id " + std::to_string(id) +
                    ", outside the vocabulary [0, " + std::to_string(config.vocabSize) + ")");
      }
    }
    const int64_t needed = int64_t(p.size()) + request.sampling.maxTokens;
    if (needed > config.maxPositions) {
      throw Error("prompt " + std::to_string(r) + " (" + std::to_string(p.size()) +
                  " tokens) plus max_tokens " + std::to_string(request.sampling.maxTokens) +
                  " exceeds max_position_embeddings (" + std::to_string(config.maxPositions) + ")");
    }
  }
}

void runGeneration(RankContext& ctx, const GenerateRequest& request, GenerateResult* result,
                   PortObserver* observer) {
  const auto started = std::chrono::steady_clock::now();
  const ModelConfig& config = ctx.model.config();
  validateRequest(request, config);
  const SamplingParams& sp = request.sampling;
  std::vector<int64_t> stopIds = sp.stopTokenIds;
  if (!sp.ignoreEos)
    stopIds.insert(stopIds.end(), ctx.source.eosTokenIds.begin(), ctx.source.eosTokenIds.end());

  const auto cacheOptions = at::TensorOptions().dtype(ctx.dtype).device(ctx.device);
  std::vector<Sequence> seqs(request.prompts.size());
  std::vector<Sampler> samplers;
  int64_t longest = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    seqs[i].tokens = request.prompts[i];
    seqs[i].promptLength = int64_t(request.prompts[i].size());
    longest = std::max(longest, seqs[i].promptLength + sp.maxTokens);
    samplers.emplace_back(sp, int64_t(i));
  }
  // One cache for every request (row i is request i), so decode steps attend in one batch; kept
  // by the rank for the next generation, so graphs recorded over it stay valid.
  const KvCacheLayout layout = ctx.model.kvCacheLayout();
  KvCache& cache =
      ctx.decode.cache(ctx.model.stage(), layout, int64_t(seqs.size()), longest, cacheOptions);
  const auto longOptions = at::TensorOptions().dtype(at::kLong);

  const auto graphLayers = [&ctx] {
    const LayerReplayer* r =
        ctx.device.is_cuda() ? ctx.decode.replayer(ctx.group, ctx.device) : nullptr;
    return r ? std::pair(r->layersReplayed(), r->layersSegmented()) : std::pair<int64_t, int64_t>();
  };
  const auto graphLayersBefore = graphLayers();
  // The sampled ids reach every rank of every stage.
  ProcessGroup& everyRank = ctx.pipeline ? ctx.pipeline->world() : ctx.group;
  int64_t step = 0;
  bool cancelled = false;
  for (; step < sp.maxTokens; ++step) {
    std::vector<size_t> active;
    for (size_t i = 0; i < seqs.size(); ++i) {
      if (!seqs[i].finished) active.push_back(i);
    }
    if (active.empty()) break;
    // Flatten this step's new tokens of every active request.
    std::vector<int64_t> ids, positions, lastRows, slots, past;
    ForwardBatch batch{ctx.group, at::Tensor(), {}, observer, step, {}, {}};
    bool decodeOnly = true;
    for (size_t i : active) {
      Sequence& s = seqs[i];
      const int64_t n = int64_t(s.tokens.size()) - s.cached;
      batch.spans.push_back({int64_t(ids.size()), n, s.cached, &cache, int64_t(i), int64_t(i)});
      decodeOnly = decodeOnly && n == 1;
      slots.push_back(int64_t(i));
      past.push_back(s.cached);
      for (int64_t t = s.cached; t < int64_t(s.tokens.size()); ++t) {
        ids.push_back(s.tokens[t]);
        positions.push_back(t);
      }
      lastRows.push_back(int64_t(ids.size()) - 1);
    }
    // The step's ids, positions, last rows and cache slots reach the device in one copy.
    const int64_t T = int64_t(ids.size()), R = int64_t(active.size());
    std::vector<int64_t> host = ids;
    host.insert(host.end(), positions.begin(), positions.end());
    host.insert(host.end(), lastRows.begin(), lastRows.end());
    host.insert(host.end(), slots.begin(), slots.end());
    const at::Tensor device = at::tensor(host, longOptions).to(ctx.device);
    batch.positions = device.narrow(0, T, T);
    // Batched decode: on the GPU for every cache; on the CPU for a latent cache too, whose
    // latent-space attention (MLA) runs there as on the GPU.
    if (decodeOnly && (ctx.device.is_cuda() || layout.parts == 1))
      prepareDecode(cache, layout, slots, past, device.narrow(0, 2 * T + R, R), batch);
    if (ctx.device.is_cuda() && ctx.model.graphCapturable())
      batch.replayer = ctx.decode.replayer(ctx.group, ctx.device);
    if (ctx.job.failure.armed()) batch.failure = &ctx.job.failure;
    batch.worldRank = ctx.rank;
    // [R, V] on the last stage's ranks; undefined on the others.
    at::Tensor logits =
        runStages(ctx, device.narrow(0, 0, T), batch, [&](const at::Tensor& hidden) {
          // In a decode step every row is its request's last.
          at::Tensor last =
              decodeOnly ? hidden : hidden.index_select(0, device.narrow(0, 2 * T, R));
          PortValue lv = PortValue::single(ctx.model.logits(last, batch));
          if (observer) batch.visit(ctx.model.logitsPort(), PortRole::Output, lv);
          return lv.items[0];
        });
    for (size_t i : active) seqs[i].cached = int64_t(seqs[i].tokens.size());

    // The sampler (rank 0 of the last stage) samples; the ids, its cancel decision and which
    // requests' logits hold a NaN reach every rank in one broadcast: [ids R][cancel][NaN R].
    // (-inf is a legal logit: a trace may ban a token with it.)
    const int64_t R2 = int64_t(active.size());
    at::Tensor decision = at::zeros({2 * R2 + 1}, longOptions);
    if (ctx.isSampler()) {
      auto* d = decision.data_ptr<int64_t>();
      const at::Tensor nonFinite = at::isnan(logits).any(-1).to(at::kLong);
      if (sp.temperature <= 0.0) {
        // Greedy: one argmax and one device-to-host copy for all (in the activation dtype: the
        // cast to fp32 keeps every value and so the first maximum).
        const at::Tensor greedy = at::cat({logits.argmax(-1), nonFinite}).to(at::kCPU).contiguous();
        std::memcpy(d, greedy.data_ptr<int64_t>(), size_t(R2) * sizeof(int64_t));
        std::memcpy(d + R2 + 1, greedy.data_ptr<int64_t>() + R2, size_t(R2) * sizeof(int64_t));
      } else {
        const at::Tensor bad = nonFinite.to(at::kCPU).contiguous();
        std::memcpy(d + R2 + 1, bad.data_ptr<int64_t>(), size_t(R2) * sizeof(int64_t));
        logits = logits.to(at::kFloat);
        for (size_t r = 0; r < active.size(); ++r) {
          if (d[R2 + 1 + int64_t(r)] == 0) d[r] = samplers[active[r]].sample(logits[r]);
        }
      }
      d[active.size()] = ctx.cancelRequested() ? 1 : 0;
    }
    if (ctx.fillsResult() && request.returnLogits) {
      at::Tensor host = logits.to(at::kCPU).to(at::kFloat);
      for (size_t r = 0; r < active.size(); ++r) seqs[active[r]].logits.push_back(host[r]);
    }
    // Through the device only when another rank or a trace's model.samples needs it: a single
    // rank's plain step keeps its decision on the host (two copies and a wait less per token).
    if (everyRank.size() > 1 || observer) {
      at::Tensor shared = decision.to(ctx.device);
      static const std::string kSite = "model.samples (the sampling rank's tokens)";
      CollectiveSite site(kSite, step);
      everyRank.broadcast(shared, ctx.samplerRank());
      if (observer) {  // a write to model.samples forces the token on every rank alike
        PortValue sv = PortValue::single(shared.narrow(0, 0, int64_t(active.size())));
        batch.visit(ctx.model.samplesPort(), PortRole::Output, sv);
        if (!sv.items[0].is_same(shared.narrow(0, 0, int64_t(active.size())))) {
          shared.narrow(0, 0, int64_t(active.size())).copy_(sv.items[0]);
        }
      }
      decision = shared.to(at::kCPU);
    }
    const auto* d = decision.data_ptr<int64_t>();
    std::string nonFiniteRequests;
    for (size_t r = 0; r < active.size(); ++r) {
      if (d[R2 + 1 + int64_t(r)] != 0)
        nonFiniteRequests += (nonFiniteRequests.empty() ? "" : ", ") + std::to_string(active[r]);
    }
    if (!nonFiniteRequests.empty()) {  // every rank sees the same flags and fails alike
      throw Error("the logits of step " + std::to_string(step) + " hold NaN for request(s) " +
                  nonFiniteRequests +
                  ": a NaN reached the model's output (a weight or input that is not finite, a "
                  "trace write of NaN, or an overflow in fp16: try bf16 or f32); generation "
                  "stopped");
    }
    for (size_t r = 0; r < active.size(); ++r) {
      Sequence& s = seqs[active[r]];
      s.tokens.push_back(d[r]);
      const int64_t generated = int64_t(s.tokens.size()) - s.promptLength;
      if (std::find(stopIds.begin(), stopIds.end(), d[r]) != stopIds.end() ||
          containsStopString(request, s)) {
        s.finished = true;
        s.finishReason = "stop";
      } else if (generated >= sp.maxTokens) {
        s.finished = true;
        s.finishReason = "length";
      }
    }
    if (observer) {
      std::vector<bool> finished(seqs.size(), false);
      for (size_t r = 0; r < active.size(); ++r) {
        Sequence& s = seqs[active[r]];
        if (!s.finished && observer->stopRequested(int64_t(active[r]))) {
          s.finished = true;
          s.finishReason = "stop";
        }
        finished[active[r]] = s.finished || d[active.size()] != 0;
      }
      observer->endStep(batch, finished);
    }
    ctx.setProgress(step + 1);
    if (d[active.size()] != 0) {
      cancelled = true;
      ++step;
      break;
    }
  }
  if (observer) {
    std::vector<std::vector<int64_t>> generated;
    for (const Sequence& s : seqs)
      generated.emplace_back(s.tokens.begin() + s.promptLength, s.tokens.end());
    observer->finish(generated);
  }
  if (!ctx.fillsResult() || !result) return;
  result->steps = step;
  const auto graphLayersAfter = graphLayers();
  result->graphLayers = graphLayersAfter.first - graphLayersBefore.first;
  result->segmentedLayers = graphLayersAfter.second - graphLayersBefore.second;
  result->outputs.clear();
  for (Sequence& s : seqs) {
    RequestOutput out;
    out.promptIds.assign(s.tokens.begin(), s.tokens.begin() + s.promptLength);
    out.tokenIds.assign(s.tokens.begin() + s.promptLength, s.tokens.end());
    out.finishReason = s.finished ? s.finishReason : (cancelled ? "cancelled" : "length");
    if (request.returnLogits && !s.logits.empty()) out.logits = toHostFloat(at::stack(s.logits));
    result->outputs.push_back(std::move(out));
  }
  result->seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
}

}  // namespace shardscope
