#include "stage_reads.h"

#include "../error.h"
#include "value.h"

namespace shardscope::trace {

int holdingStage(const RankContext& ctx, const Module& m) {
  if (!ctx.pipeline || ctx.model.portId(m, PortRole::Output) < 0) return -1;
  const int stage = ctx.model.moduleStage(m);
  return stage == kEveryStage ? -1 : stage;
}

std::vector<at::Tensor> computeOnStage(RankContext& ctx, int stage,
                                       const std::function<std::vector<at::Tensor>()>& compute) {
  StageMessage m;
  if (ctx.stage() == stage) {
    try {
      m.items = compute();
    } catch (const CollectiveAborted&) {
      throw;
    } catch (const CollectiveTimeout&) {
      throw;
    } catch (const c10::Error& e) {
      m = errorMessage(std::string("torch: ") + e.what_without_backtrace());
    } catch (const std::exception& e) {
      m = errorMessage(e.what());
    }
  }
  m = ctx.pipeline->share(stage, std::move(m));
  if (const std::string error = errorOf(m); !error.empty()) throw RuntimeFailure(error);
  return std::move(m.items);
}

std::optional<at::Tensor> parameterFromStage(RankContext& ctx, int stage, const Module& m,
                                             const std::string& name) {
  const Parameter* p = ctx.stage() == stage ? m.parameter(name) : nullptr;
  StageMessage exists;
  exists.tag = p ? 1 : 0;
  if (ctx.pipeline->share(stage, std::move(exists)).tag == 0) return std::nullopt;
  return ctx.pipeline->sharePerTpRank(stage, p ? p->shard : at::Tensor());
}

std::string firstParameterName(RankContext& ctx, const Module& m) {
  const auto local = [&m] {
    return m.parameters().empty() ? std::string() : m.parameters()[0].name;
  };
  const int stage = holdingStage(ctx, m);
  if (stage < 0) return local();
  return textOf(computeOnStage(ctx, stage, [&] { return std::vector{textTensor(local())}; })[0]);
}

}  // namespace shardscope::trace
