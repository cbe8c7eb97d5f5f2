// The family registry: which CausalLM a config builds (CausalLM::buildCausalLM). Adding a family
// is its file and one row here.
#include <utility>

#include "../../error.h"
#include "../causal_lm.h"
#include "deepseek_v2.h"
#include "dense_decoder.h"

namespace shardscope {

namespace {
template <class Model, class... Extra>
std::unique_ptr<CausalLM> build(const ModelConfig& config, LoadContext& ctx, Extra&&... extra) {
  auto m = std::make_unique<Model>(config, ctx.tp, std::forward<Extra>(extra)...);
  m->load(ctx);
  return m;
}

// MLA's model splits its KV cache over decode-context ranks, not its layers over stages.
void checkOneStage(const ModelConfig& config, const LoadContext& ctx) {
  if (ctx.stage.stages.count() <= 1) return;
  throw Error(std::string(familyName(config.family)) +
              " runs as one pipeline stage: use --pp 1 (tensor parallelism and --dcp work); "
              "pipeline stages work for Qwen3, Qwen2, Llama and Qwen3-MoE");
}
}  // namespace

std::unique_ptr<CausalLM> buildCausalLM(const ModelConfig& config, LoadContext& ctx) {
  switch (config.family) {
    case Family::Qwen3:
    case Family::Qwen2:
    case Family::Llama:
    case Family::Qwen3Moe:
      return build<DenseCausalLM>(config, ctx, ctx.stage);
    case Family::DeepseekV2:
      checkOneStage(config, ctx);
      return build<DeepseekV2ForCausalLM>(config, ctx);
  }
  throw Error(std::string("no model for family ") + familyName(config.family));
}

}  // namespace shardscope
