#include "generation.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <memory>
#include <utility>

#include "../error.h"
#include "../host_tensor_conversion.h"
#include "../model/tokenizer.h"
#include "../parallel/collective_board.h"
#include "../runtime_switches.h"
#include "pipeline_step.h"
#include "sampler.h"
#include "step_decision.h"

namespace shardscope {
namespace {

struct Sequence {
  std::vector<int64_t> tokens;  // prompt then generated
  int64_t promptLength = 0;
  int64_t cached = 0;  // tokens already in the KV cache
  bool finished = false;
  std::string finishReason;
  // The step launched ahead at whose end a trace stopped it (tracer.stop()), or -1: it ends when
  // that step's token is appended, and no later step is launched for it.
  int64_t stopsAfterStep = -1;
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

// Greedy steps run one step ahead of the host: the next step is launched with the ids still on
// the device while the host reads the step before (SHARDSCOPE_DECODE_AHEAD=0 turns it off, to
// compare). Not with pipeline stages, kept logits or sampling (decided on the host). With a trace
// only where every request ends at max_tokens or at the trace's tracer.stop() (ignore_eos, no
// stop ids or strings): then the ends a trace is told after each step are known when the step is
// launched, and it sees no step past a request's end.
bool decodesAhead(const RankContext& ctx, const GenerateRequest& request,
                  const PortObserver* observer) {
  const SamplingParams& sp = request.sampling;
  if (ctx.pipeline || request.returnLogits || sp.temperature > 0.0) return false;
  if (observer && !(sp.ignoreEos && sp.stop.empty() && sp.stopTokenIds.empty())) return false;
  return RuntimeSwitches::current().decodeAhead;
}

// The requests the next step computes: those not finished; with a step in flight (decode-ahead),
// those of its rows whose token after the one in flight is still within max_tokens.
std::vector<size_t> launchable(const std::vector<Sequence>& seqs, int64_t maxTokens,
                               const StepDecision* inFlight) {
  std::vector<size_t> active;
  if (!inFlight) {
    for (size_t i = 0; i < seqs.size(); ++i) {
      if (!seqs[i].finished) active.push_back(i);
    }
    return active;
  }
  for (size_t i : inFlight->active()) {
    const Sequence& s = seqs[i];
    const int64_t generated = int64_t(s.tokens.size()) - s.promptLength + 1;
    if (!s.finished && s.stopsAfterStep < 0 && generated < maxTokens) active.push_back(i);
  }
  return active;
}

// Host ints on the device without a wait for it (through pinned memory on a GPU).
at::Tensor toDevice(const std::vector<int64_t>& values, at::Device device) {
  const auto longs = at::TensorOptions().dtype(at::kLong);
  if (!device.is_cuda()) return at::tensor(values, longs);
  at::Tensor host = at::empty({int64_t(values.size())}, longs.pinned_memory(true));
  std::memcpy(host.data_ptr<int64_t>(), values.data(), values.size() * sizeof(int64_t));
  return host.to(longs.device(device), /*non_blocking=*/true);
}

int64_t rowOf(const std::vector<size_t>& active, size_t request) {
  const auto it = std::find(active.begin(), active.end(), request);
  SS_ASSERT(it != active.end(), "a decode-ahead step names a request the step before lacks");
  return int64_t(it - active.begin());
}

struct LaunchedStep {
  ForwardBatch batch;
  at::Tensor logits;  // [R, V] on the last stage's ranks; undefined on the others
};

// Builds and runs one step of the active requests, up to the logits: their new tokens come from
// the host, or with a step in flight (decode-ahead) from the ids it chose, still on the device.
struct StepLauncher {
  RankContext& ctx;
  KvCache& cache;
  const KvCacheLayout& layout;
  PortObserver* observer;

  LaunchedStep launch(std::vector<Sequence>& seqs, const std::vector<size_t>& active, int64_t step,
                      const StepDecision* inFlight) {
    std::vector<int64_t> ids, positions, lastRows, slots, past, rows;
    // A trace whose blocks have all ended (an empty one, or past its last read) watches no more
    // forwards. Stages keep theirs: a stage may still share port values with its twins.
    PortObserver* watching =
        observer && (ctx.pipeline || observer->watchesForward()) ? observer : nullptr;
    ForwardBatch batch{ctx.group, at::Tensor(), {}, watching, step, {}, {}};
    bool decodeOnly = true;
    for (size_t i : active) {
      Sequence& s = seqs[i];
      const int64_t n = inFlight ? 1 : int64_t(s.tokens.size()) - s.cached;
      batch.spans.push_back({int64_t(ids.size()), n, s.cached, &cache, int64_t(i), int64_t(i)});
      decodeOnly = decodeOnly && n == 1;
      slots.push_back(int64_t(i));
      past.push_back(s.cached);
      if (inFlight) {
        ids.push_back(0);  // the step in flight's choice, filled in on the device below
        positions.push_back(s.cached);
        rows.push_back(rowOf(inFlight->active(), i));
      }
      for (int64_t t = s.cached; !inFlight && t < int64_t(s.tokens.size()); ++t) {
        ids.push_back(s.tokens[size_t(t)]);
        positions.push_back(t);
      }
      lastRows.push_back(int64_t(ids.size()) - 1);
      s.cached += n;
    }
    // The step's ids, positions, last rows, cache slots (and rows of the step in flight) reach
    // the device in one copy.
    const int64_t T = int64_t(ids.size()), R = int64_t(active.size());
    std::vector<int64_t> host = ids;
    for (const auto* part : {&positions, &lastRows, &slots, &rows})
      host.insert(host.end(), part->begin(), part->end());
    const at::Tensor device = toDevice(host, ctx.device);
    if (inFlight) {
      device.narrow(0, 0, T).copy_(
          inFlight->deviceIds().index_select(0, device.narrow(0, 2 * T + 2 * R, R)));
    }
    batch.positions = device.narrow(0, T, T);
    // Batched decode: on the GPU for every cache; on the CPU for a latent cache too, whose
    // latent-space attention (MLA) runs there as on the GPU.
    if (decodeOnly && (ctx.device.is_cuda() || layout.parts == 1))
      prepareDecode(cache, layout, slots, past, device.narrow(0, 2 * T + R, R), batch);
    if (ctx.device.is_cuda() && ctx.model.graphCapturable())
      batch.replayer = ctx.decode.replayer(ctx.group, ctx.device);
    if (ctx.job.failure.armed()) batch.failure = &ctx.job.failure;
    batch.worldRank = ctx.rank;
    at::Tensor logits =
        runStages(ctx, device.narrow(0, 0, T), batch, [&](const at::Tensor& hidden) {
          // In a decode step every row is its request's last.
          at::Tensor last =
              decodeOnly ? hidden : hidden.index_select(0, device.narrow(0, 2 * T, R));
          PortValue lv = PortValue::single(ctx.model.logits(last, batch));
          if (watching) batch.visit(ctx.model.logitsPort(), PortRole::Output, lv);
          return lv.items[0];
        });
    return {std::move(batch), std::move(logits)};
  }
};

void keepLogits(std::vector<Sequence>& seqs, const StepDecision& decision,
                const at::Tensor& logits) {
  const at::Tensor host = logits.to(at::kCPU).to(at::kFloat);
  for (size_t r = 0; r < decision.active().size(); ++r)
    seqs[decision.active()[r]].logits.push_back(host[int64_t(r)]);
}

// Every rank sees the same flags and fails alike. (-inf is a legal logit: a trace may ban a
// token with it.)
void throwIfNonFinite(const StepDecision& decision, const std::vector<size_t>& rows, int64_t step) {
  std::string nonFiniteRequests;
  for (size_t r : rows) {
    if (decision.nonFinite(r))
      nonFiniteRequests +=
          (nonFiniteRequests.empty() ? "" : ", ") + std::to_string(decision.active()[r]);
  }
  if (nonFiniteRequests.empty()) return;
  throw Error("the logits of step " + std::to_string(step) + " hold NaN for request(s) " +
              nonFiniteRequests +
              ": a NaN reached the model's output (a weight or input that is not finite, a "
              "trace write of NaN, or an overflow in fp16: try bf16 or f32); generation "
              "stopped");
}

// Appends the rows' tokens to their requests and ends those that stop or reach max_tokens.
void appendTokens(const GenerateRequest& request, const std::vector<int64_t>& stopIds,
                  std::vector<Sequence>& seqs, const StepDecision& decision,
                  const std::vector<size_t>& rows) {
  for (size_t r : rows) {
    Sequence& s = seqs[decision.active()[r]];
    const int64_t id = decision.id(r);
    s.tokens.push_back(id);
    const int64_t generated = int64_t(s.tokens.size()) - s.promptLength;
    if (std::find(stopIds.begin(), stopIds.end(), id) != stopIds.end() ||
        containsStopString(request, s)) {
      s.finished = true;
      s.finishReason = "stop";
    } else if (generated >= request.sampling.maxTokens) {
      s.finished = true;
      s.finishReason = "length";
    }
  }
}

// A trace's end of step: the requests it stops end here; it learns which requests are done.
void endStep(PortObserver& observer, const ForwardBatch& batch, std::vector<Sequence>& seqs,
             const StepDecision& decision) {
  std::vector<bool> finished(seqs.size(), false);
  const std::vector<size_t>& active = decision.active();
  for (size_t r = 0; r < active.size(); ++r) {
    Sequence& s = seqs[active[r]];
    if (!s.finished && observer.stopRequested(int64_t(active[r]))) {
      s.finished = true;
      s.finishReason = "stop";
    }
    finished[active[r]] = s.finished || decision.cancel();
  }
  observer.endStep(batch, finished);
}

// The same for a step just launched ahead (decodesAhead allows it with a trace only where the
// ends do not depend on the tokens): a request ends with it when its token will be its
// max_tokens-th or the trace stopped it; `afterInFlight`: the step before is still unread. A
// cancel is read a step later here, so a cancelled job's trace may see one more step end.
void endLaunchedStep(PortObserver& observer, const ForwardBatch& batch, std::vector<Sequence>& seqs,
                     const std::vector<size_t>& active, bool afterInFlight, int64_t maxTokens) {
  std::vector<bool> finished(seqs.size(), false);
  for (size_t i : active) {
    Sequence& s = seqs[i];
    const int64_t generated =
        int64_t(s.tokens.size()) - s.promptLength + (afterInFlight ? 1 : 0) + 1;
    if (s.stopsAfterStep < 0 && observer.stopRequested(int64_t(i))) s.stopsAfterStep = batch.step;
    finished[i] = s.stopsAfterStep >= 0 || generated >= maxTokens;
  }
  observer.endStep(batch, finished);
}

// After step `step` (launched ahead) is applied: the requests a trace stopped with it end here,
// as endStep ends them after a step read at once (one that reached max_tokens keeps "length").
void endStoppedRequests(std::vector<Sequence>& seqs, const std::vector<size_t>& active,
                        int64_t step) {
  for (size_t i : active) {
    Sequence& s = seqs[i];
    if (s.stopsAfterStep != step || s.finished) continue;
    s.finished = true;
    s.finishReason = "stop";
  }
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

namespace {

// One generate job on one rank: its requests' sequences and samplers, the KV cache they share, and
// the steps launched and applied. With decode-ahead, a step is launched before the host has read
// the one before (in flight); its decision is applied after the next launch.
class GenerationJob {
 public:
  GenerationJob(RankContext& ctx, const GenerateRequest& request, PortObserver* observer)
      : ctx_(ctx),
        request_(request),
        sampling_(request.sampling),
        observer_(observer),
        seqs_(request.prompts.size()),
        cache_(startSequences()),
        everyRank_(ctx.pipeline ? ctx.pipeline->world() : ctx.group),
        ahead_(decodesAhead(ctx, request, observer)),
        launcher_{ctx, cache_, layout_, observer},
        graphLayersBefore_(graphLayers()) {
    stopIds_ = sampling_.stopTokenIds;
    if (!sampling_.ignoreEos)
      stopIds_.insert(stopIds_.end(), ctx.source.eosTokenIds.begin(), ctx.source.eosTokenIds.end());
  }

  // The steps until every request has ended or the job is cancelled; the job ends when its work on
  // the device does (a cancel leaves the step after it unread: its tokens are not the request's).
  void run() {
    try {
      while (!cancelled_ && launchNext()) {
      }
    } catch (...) {
      waitForPendingSteps();
      throw;
    }
    if (inFlight_) inFlight_->wait(ctx_.group);
  }

  // Tells the observer the generated ids; fills `result` on the rank that reports it.
  void finish(GenerateResult* result, std::chrono::steady_clock::time_point started) {
    if (observer_) {
      std::vector<std::vector<int64_t>> generated;
      for (const Sequence& s : seqs_)
        generated.emplace_back(s.tokens.begin() + s.promptLength, s.tokens.end());
      observer_->finish(generated);
    }
    if (!ctx_.fillsResult() || !result) return;
    result->steps = step_;
    const auto graphLayersAfter = graphLayers();
    result->graphLayers = graphLayersAfter[0] - graphLayersBefore_[0];
    result->segmentedLayers = graphLayersAfter[1] - graphLayersBefore_[1];
    result->segmentedFusedLayers = graphLayersAfter[2] - graphLayersBefore_[2];
    result->aheadSteps = aheadSteps_;
    result->outputs.clear();
    for (Sequence& s : seqs_) result->outputs.push_back(outputOf(s));
    result->seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  }

 private:
  // The prompts as sequences with their samplers, and the cache they share: one for every request
  // (row i is request i), so decode steps attend in one batch; kept by the rank for the next
  // generation, so graphs recorded over it stay valid.
  KvCache& startSequences() {
    int64_t longest = 0;
    for (size_t i = 0; i < seqs_.size(); ++i) {
      seqs_[i].tokens = request_.prompts[i];
      seqs_[i].promptLength = int64_t(request_.prompts[i].size());
      longest = std::max(longest, seqs_[i].promptLength + sampling_.maxTokens);
      samplers_.emplace_back(sampling_, int64_t(i));
    }
    layout_ = ctx_.model.kvCacheLayout();
    const auto cacheOptions = at::TensorOptions().dtype(ctx_.dtype).device(ctx_.device);
    return ctx_.decode.cache(ctx_.model.stage(), layout_, int64_t(seqs_.size()), longest,
                             cacheOptions);
  }

  // Layers replayed from graphs, segmented, and segmented with fused attention, so far.
  std::array<int64_t, 3> graphLayers() const {
    const LayerReplayer* r =
        ctx_.device.is_cuda() ? ctx_.decode.replayer(ctx_.group, ctx_.device) : nullptr;
    return r ? std::array{r->layersReplayed(), r->layersSegmented(), r->layersSegmentedFused()}
             : std::array<int64_t, 3>{};
  }

  // Launches the next step (if any request still needs one) and applies the step it follows;
  // false when nothing is left to launch or apply.
  bool launchNext() {
    std::vector<size_t> active = launchable(seqs_, sampling_.maxTokens, inFlight_.get());
    if (active.empty() && !inFlight_) return false;
    if (!active.empty()) launch(std::move(active));
    if (inFlight_) apply(*inFlight_, nullptr);  // a step that was not waited for holds no observer
    inFlight_ = std::move(launched_);
    return true;
  }

  void launch(std::vector<size_t> active) {
    const int64_t at = step_ + (inFlight_ ? 1 : 0);
    aheadSteps_ += inFlight_ ? 1 : 0;
    LaunchedStep s = launcher_.launch(seqs_, active, at, inFlight_.get());
    if (ahead_) {
      launched_ = std::make_unique<StepDecision>(
          decideOnDevice(ctx_, everyRank_, s.logits, std::move(active), s.batch));
      if (observer_) {  // its ends are known now; the next step's blocks start from here
        endLaunchedStep(*observer_, s.batch, seqs_, launched_->active(), inFlight_ != nullptr,
                        sampling_.maxTokens);
      }
      return;
    }
    StepDecision decision =
        decideOnHost(ctx_, everyRank_, s.logits, std::move(active), samplers_, sampling_, s.batch);
    if (ctx_.fillsResult() && request_.returnLogits) keepLogits(seqs_, decision, s.logits);
    apply(decision, &s.batch);
  }

  // A step's tokens to its requests. Rows of requests that stopped after a decode-ahead step was
  // launched are not theirs; a step left with none is dropped.
  void apply(StepDecision& decision, const ForwardBatch* batch) {
    decision.wait(ctx_.group);
    std::vector<size_t> live;
    for (size_t r = 0; r < decision.active().size(); ++r) {
      if (!seqs_[decision.active()[r]].finished) live.push_back(r);
    }
    if (live.empty()) return;
    throwIfNonFinite(decision, live, step_);
    appendTokens(request_, stopIds_, seqs_, decision, live);
    cancelled_ = decision.cancel();
    if (observer_ && batch) endStep(*observer_, *batch, seqs_, decision);
    if (!batch) endStoppedRequests(seqs_, decision.active(), step_);
    ctx_.setProgress(++step_);
  }

  // A failed job's graphs and cache are dropped: the steps still running on the device that
  // replay or write them end first. The job's error is the first one; a step that fails too only
  // ends its wait.
  void waitForPendingSteps() noexcept {
    for (auto* pending : {&launched_, &inFlight_}) {
      try {
        if (*pending) (*pending)->wait(ctx_.group);
      } catch (...) {
      }
    }
  }

  RequestOutput outputOf(const Sequence& s) const {
    RequestOutput out;
    out.promptIds.assign(s.tokens.begin(), s.tokens.begin() + s.promptLength);
    out.tokenIds.assign(s.tokens.begin() + s.promptLength, s.tokens.end());
    out.finishReason = s.finished ? s.finishReason : (cancelled_ ? "cancelled" : "length");
    if (request_.returnLogits && !s.logits.empty()) out.logits = toHostFloat(at::stack(s.logits));
    return out;
  }

  RankContext& ctx_;
  const GenerateRequest& request_;
  const SamplingParams& sampling_;
  PortObserver* observer_;
  std::vector<Sequence> seqs_;
  std::vector<Sampler> samplers_;  // with layout_, filled by startSequences as cache_ is bound
  std::vector<int64_t> stopIds_;
  KvCacheLayout layout_;
  KvCache& cache_;
  ProcessGroup& everyRank_;  // the sampled ids reach every rank of every stage
  const bool ahead_;
  StepLauncher launcher_;
  const std::array<int64_t, 3> graphLayersBefore_;
  std::unique_ptr<StepDecision> inFlight_;  // launched ahead, its decision not yet applied
  std::unique_ptr<StepDecision> launched_;  // launched this round (ahead)
  int64_t step_ = 0;                        // steps whose decision is applied
  int64_t aheadSteps_ = 0;
  bool cancelled_ = false;
};

}  // namespace

void runGeneration(RankContext& ctx, const GenerateRequest& request, GenerateResult* result,
                   PortObserver* observer) {
  const auto started = std::chrono::steady_clock::now();
  validateRequest(request, ctx.model.config());
  GenerationJob job(ctx, request, observer);
  job.run();
  job.finish(result, started);
}

}  // namespace shardscope
