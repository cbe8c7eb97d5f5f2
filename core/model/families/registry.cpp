// The family registry: which CausalLM a config builds (CausalLM::buildCausalLM). Adding a family
// is its file and one row here.
#include "../../error.h"
#include "../causal_lm.h"
#include "deepseek_v2.h"
#include "dense_decoder.h"

namespace shardscope {

namespace {
template <class Model>
std::unique_ptr<CausalLM> build(const ModelConfig& config, LoadContext& ctx) {
  auto m = std::make_unique<Model>(config, ctx.tp);
  m->load(ctx);
  return m;
}
}  // namespace

std::unique_ptr<CausalLM> buildCausalLM(const ModelConfig& config, LoadContext& ctx) {
  switch (config.family) {
    case Family::Qwen3:
    case Family::Qwen2:
    case Family::Llama:
    case Family::Qwen3Moe:
      return build<DenseCausalLM>(config, ctx);
    case Family::DeepseekV2:
      return build<DeepseekV2ForCausalLM>(config, ctx);
  }
  throw Error(std::string("no model for family ") + familyName(config.family));
}

}  // namespace shardscope
