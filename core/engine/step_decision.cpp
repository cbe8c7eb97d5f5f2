#include "step_decision.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <cstring>
#include <string>
#include <thread>
#include <utility>

#include "../parallel/collective_board.h"

namespace shardscope {

StepDecision::StepDecision(std::vector<size_t> active, at::Tensor host, at::Tensor deviceIds,
                           std::unique_ptr<c10::Event> copied)
    : active_(std::move(active)),
      host_(std::move(host)),
      deviceIds_(std::move(deviceIds)),
      copied_(std::move(copied)) {}

void StepDecision::wait(ProcessGroup& group) {
  if (copied_) {
    // The copy follows the step's last kernels; a group that aborts meanwhile ends the wait.
    while (!copied_->query()) {
      group.throwIfAborted();
      std::this_thread::yield();
    }
    copied_.reset();
  }
}

namespace {

const std::string kSamplesSite = "model.samples (the sampling rank's tokens)";

// A trace's model.samples: it sees the step's ids (`ids`, on every rank alike) and may overwrite
// them; a write forces the tokens on every rank alike, as every rank's trace makes it.
void visitSamples(RankContext& ctx, const ForwardBatch& batch, at::Tensor ids) {
  if (!batch.observer) return;
  PortValue sv = PortValue::single(ids);
  batch.visit(ctx.model.samplesPort(), PortRole::Output, sv);
  if (!sv.items[0].is_same(ids)) ids.copy_(sv.items[0]);
}

// Whether the step's observer may wait on model.samples; one that tells its waits and does not is
// told the port passed.
bool samplesWatched(RankContext& ctx, const ForwardBatch& batch) {
  PortObserver* observer = batch.observer;
  if (!observer) return false;
  const Module& samples = ctx.model.samplesPort();
  if (!observer->tellsPortWaits() || observer->waitsOn(samples, PortRole::Output, batch.step))
    return true;
  observer->portPassed(samples, PortRole::Output, batch);
  return false;
}

}  // namespace

StepDecision decideOnHost(RankContext& ctx, ProcessGroup& everyRank, const at::Tensor& stepLogits,
                          std::vector<size_t> active, std::vector<Sampler>& samplers,
                          const SamplingParams& sp, const ForwardBatch& batch) {
  const int64_t R = int64_t(active.size());
  const auto longOptions = at::TensorOptions().dtype(at::kLong);
  at::Tensor decision = at::zeros({2 * R + 1}, longOptions);
  if (ctx.isSampler()) {
    auto* d = decision.data_ptr<int64_t>();
    at::Tensor logits = stepLogits;
    const at::Tensor nonFinite = at::isnan(logits).any(-1).to(at::kLong);
    if (sp.temperature <= 0.0) {
      // Greedy: one argmax and one device-to-host copy for all (in the activation dtype: the
      // cast to fp32 keeps every value and so the first maximum).
      const at::Tensor greedy = at::cat({logits.argmax(-1), nonFinite}).to(at::kCPU).contiguous();
      std::memcpy(d, greedy.data_ptr<int64_t>(), size_t(R) * sizeof(int64_t));
      std::memcpy(d + R + 1, greedy.data_ptr<int64_t>() + R, size_t(R) * sizeof(int64_t));
    } else {
      const at::Tensor bad = nonFinite.to(at::kCPU).contiguous();
      std::memcpy(d + R + 1, bad.data_ptr<int64_t>(), size_t(R) * sizeof(int64_t));
      logits = logits.to(at::kFloat);
      for (int64_t r = 0; r < R; ++r) {
        if (d[R + 1 + r] == 0) d[r] = samplers[active[size_t(r)]].sample(logits[r]);
      }
    }
    d[R] = ctx.cancelRequested() ? 1 : 0;
  }
  // Through the device only when another rank or a trace's model.samples needs it: a single
  // rank's plain step, or a traced one whose blocks do not wait on model.samples, keeps its
  // decision on the host (two synchronising copies less per step).
  if (everyRank.size() > 1 || samplesWatched(ctx, batch)) {
    at::Tensor shared = decision.to(ctx.device);
    CollectiveSite site(kSamplesSite, batch.step);
    everyRank.broadcast(shared, ctx.samplerRank());
    visitSamples(ctx, batch, shared.narrow(0, 0, R));
    decision = shared.to(at::kCPU);
  }
  return StepDecision(std::move(active), std::move(decision));
}

StepDecision decideOnDevice(RankContext& ctx, ProcessGroup& everyRank, const at::Tensor& logits,
                            std::vector<size_t> active, const ForwardBatch& batch) {
  const int64_t R = int64_t(active.size());
  const auto options = at::TensorOptions().dtype(at::kLong).device(ctx.device);
  at::Tensor decision;
  if (ctx.isSampler()) {
    // The same ids as decideOnHost's greedy branch; the cancel flag is filled in on the device.
    decision = at::cat({logits.argmax(-1), at::full({1}, ctx.cancelRequested() ? 1 : 0, options),
                        at::isnan(logits).any(-1).to(at::kLong)});
  } else {
    decision = at::empty({2 * R + 1}, options);
  }
  if (everyRank.size() > 1) {
    CollectiveSite site(kSamplesSite, batch.step);
    everyRank.broadcast(decision, ctx.samplerRank());
  }
  at::Tensor ids = decision.narrow(0, 0, R);
  visitSamples(ctx, batch, ids);
  if (!decision.is_cuda()) return StepDecision(std::move(active), decision, std::move(ids));
  at::Tensor host =
      at::empty({2 * R + 1}, at::TensorOptions().dtype(at::kLong).pinned_memory(true));
  host.copy_(decision, /*non_blocking=*/true);
  auto copied = std::make_unique<c10::Event>(c10::DeviceType::CUDA);
  copied->record(c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->getStream(ctx.device));
  return StepDecision(std::move(active), std::move(host), std::move(ids), std::move(copied));
}

}  // namespace shardscope
