#include "pipeline_step.h"

#include "../error.h"
#include "../parallel/collective_board.h"

namespace shardscope {
namespace {

// The tag of the message that ends a stage's turn (port numbers are >= 0).
constexpr int64_t kHandOver = -1;

// Serves what stage `from` shares to this rank's observer until its hand-over, and returns that.
StageMessage follow(RankContext& ctx, int from, const ForwardBatch& batch) {
  for (;;) {
    StageMessage m = ctx.pipeline->share(from, {});
    if (m.tag == kHandOver) return m;
    const auto [module, role] = ctx.model.portAt(m.tag);
    PortValue whole{std::move(m.items), m.tuple};
    SS_ASSERT(batch.observer, "a stage shared a port value with a rank that has no observer");
    batch.observer->visitShared(*module, role, whole, batch);
  }
}

}  // namespace

at::Tensor runStages(RankContext& ctx, const at::Tensor& ids, const ForwardBatch& batch,
                     const std::function<at::Tensor(const at::Tensor& hidden)>& lastStage) {
  if (!ctx.pipeline) return lastStage(ctx.model.forward(ids, batch));
  static const std::string kSite = "the hand-over between pipeline stages";
  CollectiveSite site(kSite, batch.step);
  StageCarry carry;
  at::Tensor result;
  const int stages = ctx.stages();
  for (int s = 0; s < stages; ++s) {
    if (s != ctx.stage()) {
      StageMessage handed = follow(ctx, s, batch);
      if (s + 1 == ctx.stage()) carry = {handed.items.at(0), handed.items.at(1)};
      continue;
    }
    const at::Tensor hidden = ctx.model.forwardStage(ids, carry, batch);
    StageMessage handOver;
    handOver.tag = kHandOver;
    if (s + 1 < stages) {
      handOver.items = {carry.hidden, carry.residual};
    } else {
      result = lastStage(hidden);
    }
    ctx.pipeline->share(s, std::move(handOver));
  }
  return result;
}

int sharingStage(const RankContext& ctx, const Module& module, PortRole role) {
  if (!ctx.pipeline || ctx.model.portId(module, role) < 0) return -1;
  const int stage = ctx.model.portStage(module, role);
  return stage == kEveryStage ? -1 : stage;
}

void sharePortValue(RankContext& ctx, const Module& module, PortRole role,
                    const std::vector<at::Tensor>& wholes, bool tuple) {
  ctx.pipeline->share(ctx.stage(), {ctx.model.portId(module, role), tuple, wholes});
}

}  // namespace shardscope
