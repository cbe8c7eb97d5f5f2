#include "script_builder.h"

#include <cstdio>
#include <sstream>

namespace shardscope::ui {

std::string ScriptBuilder::quote(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '"':
        out += "\\\"";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        out += c;
    }
  }
  return out + "\"";
}

std::string ScriptBuilder::header() const {
  return "model = VLLM(" + quote(model_.spec) +
         ", tensor_parallel_size=" + std::to_string(model_.tp) +
         (model_.pp > 1 ? ", pipeline_parallel_size=" + std::to_string(model_.pp) : "") +
         (model_.expertParallel ? ", enable_expert_parallel=True" : "") +
         (model_.dcp > 1 ? ", decode_context_parallel_size=" + std::to_string(model_.dcp) : "") +
         ", dtype=" + quote(model_.dtype) + ", device=" + quote(model_.device) + ")\n";
}

std::string ScriptBuilder::traceLine(const GenerationSettings& g, int64_t maxTokens) const {
  char buf[160];
  std::snprintf(buf, sizeof buf,
                "with model.trace(max_tokens=%lld, temperature=%g, seed=%llu) as tracer:\n",
                (long long)maxTokens, g.temperature, (unsigned long long)g.seed);
  return buf;
}

std::string ScriptBuilder::layerPath(int64_t layer) const {
  return "model.model.layers[" + std::to_string(layer) + "]";
}

std::string ScriptBuilder::readPort(const PortRef& port, int64_t step,
                                    const GenerationSettings& g) const {
  std::ostringstream s;
  s << header() << traceLine(g, std::max<int64_t>(g.maxTokens, step + 1));
  for (size_t i = 0; i < g.prompts.size(); ++i) {
    s << "    with tracer.invoke(" << quote(g.prompts[i]) << "):\n"
      << "        for step in tracer.iter[" << step << "]:\n"
      << "            value_" << i << " = " << port.module << "." << port.port
      << (port.tuple ? "[0]" : "") << ".save()\n";
  }
  return s.str();
}

std::string ScriptBuilder::generate(const GenerationSettings& g) const {
  std::ostringstream s;
  s << header() << traceLine(g, g.maxTokens);
  for (size_t i = 0; i < g.prompts.size(); ++i) {
    s << "    with tracer.invoke(" << quote(g.prompts[i]) << "):\n"
      << "        logits_" << i << " = model.logits.save()\n";
  }
  return s.str();
}

std::string ScriptBuilder::zeroHeads(const HeadSet& heads, const GenerationSettings& g) const {
  const std::string prompt = quote(g.prompts.at(0));
  std::ostringstream s;
  s << header() << traceLine(g, g.maxTokens) << "    with tracer.invoke(" << prompt << "):\n"
    << "        baseline_logits = model.logits.save()\n"
    << "    with tracer.invoke(" << prompt << "):\n"
    << "        for step in tracer.iter[:]:\n";
  for (const auto& [layer, set] : heads) {
    if (set.empty()) continue;
    const std::string o = layerPath(layer) + ".self_attn.o_proj";
    s << "            z = " << o << ".input\n";
    for (int64_t h : set) s << "            " << o << ".head(z, " << h << ")[:] = 0\n";
  }
  s << "            if step == 0:\n"
    << "                ablated_logits = model.logits.save()\n";
  return s.str();
}

std::string ScriptBuilder::sweepLayer(int64_t layer, int64_t target,
                                      const GenerationSettings& g) const {
  const std::string prompt = quote(g.prompts.at(0));
  const std::string o = layerPath(layer) + ".self_attn.o_proj";
  std::ostringstream s;
  s << header() << "target = " << target << "\n"
    << traceLine(g, 1) << "    with tracer.invoke(" << prompt << "):\n"
    << "        baseline = model.logits.softmax(-1)[0, target].save()\n";
  for (int64_t h = 0; h < model_.numHeads; ++h) {
    s << "    with tracer.invoke(" << prompt << "):\n"
      << "        z = " << o << ".input\n"
      << "        " << o << ".head(z, " << h << ")[:] = 0\n"
      << "        head_" << h << " = model.logits.softmax(-1)[0, target].save()\n";
  }
  return s.str();
}

std::string ScriptBuilder::logitLens(const GenerationSettings& g) const {
  std::ostringstream s;
  s << header() << "with model.trace(" << quote(g.prompts.at(0)) << ", max_tokens=1):\n"
    << "    lens = list().save()\n"
    << "    for l in range(" << model_.numLayers << "):\n"
    << "        hidden = sum(model.model.layers[l].output)\n"
    << "        logits = model.logits_processor(model.lm_head, model.model.norm(hidden))\n"
    << "        lens.append(logits.softmax(-1).max(-1))\n";
  return s.str();
}

std::string ScriptBuilder::attentionPattern(int64_t layer, int64_t head,
                                            const GenerationSettings& g) const {
  const HeadLayout heads = model_.headLayout();
  const int64_t d = heads.headDim();
  // Columns in units of head_dim, so the script reads as "head * d".
  const int64_t qSlot = heads.rotaryQueryColumns(head).start / d;
  const int64_t kSlot = heads.rotaryKeyColumnsFor(head).start / d;
  std::ostringstream s;
  s << header() << "d = " << d << "\n"
    << "with model.trace(" << quote(g.prompts.at(0)) << ", max_tokens=1):\n"
    << "    qk = " << layerPath(layer) << ".self_attn.rotary_emb.output\n"
    << "    q_head = qk[0][:, " << qSlot << " * d:" << qSlot + 1 << " * d].save()\n"
    << "    k_head = qk[1][:, " << kSlot << " * d:" << kSlot + 1 << " * d].save()\n";
  return s.str();
}

std::string ScriptBuilder::routing(const std::vector<int64_t>& sparseLayers,
                                   const GenerationSettings& g) const {
  std::ostringstream s;
  s << header() << "with model.trace(" << quote(g.prompts.at(0)) << ", max_tokens=1):\n";
  for (int64_t l : sparseLayers) {
    const std::string mlp = layerPath(l) + ".mlp";
    // The router is vLLM's ReplicatedLinear: its output is (logits, None). Its probabilities are
    // taken in fp32, as the routing takes them.
    s << "    route_" << l << " = " << mlp << ".experts.select_experts(" << mlp
      << ".gate.output[0]).save()\n"
      << "    router_probs_" << l << " = " << mlp << ".gate.output[0].float().softmax(-1).save()\n";
  }
  return s.str();
}

std::string ScriptBuilder::ablateExpert(int64_t layer, int64_t expert,
                                        const GenerationSettings& g) const {
  const std::string prompt = quote(g.prompts.at(0));
  std::ostringstream s;
  s << header() << traceLine(g, g.maxTokens) << "    with tracer.invoke(" << prompt << "):\n"
    << "        baseline_logits = model.logits.save()\n"
    << "    with tracer.invoke(" << prompt << "):\n"
    << "        for step in tracer.iter[:]:\n"
    << "            " << layerPath(layer) << ".mlp.gate.output[0][:, " << expert
    << "] = float(\"-inf\")\n"
    << "            if step == 0:\n"
    << "                ablated_logits = model.logits.save()\n";
  return s.str();
}

}  // namespace shardscope::ui
