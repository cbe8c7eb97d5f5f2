#include "soak/port_statements.h"

#include <algorithm>

namespace shardscope::soak {
namespace {

// One layer's ports in the order the model runs them (core/model/families/dense_decoder.cpp);
// the index is the port's order within the layer.
const std::vector<PortDef> kLayerPorts = {
    {".input", Layout::Hidden},
    {".input_layernorm.output", Layout::Hidden},  // (normed, residual) past layer 0: [0] added
    {".self_attn.input", Layout::Hidden},
    {".self_attn.qkv_proj.output[0]", Layout::FusedQkv},
    {".self_attn.q_norm.output", Layout::Heads},
    {".self_attn.k_norm.output", Layout::Heads},
    {".self_attn.attn.output", Layout::Columns},
    {".self_attn.o_proj.input", Layout::OProjInput},
    {".self_attn.o_proj.output[0]", Layout::Hidden},
    {".self_attn.output", Layout::Hidden},
    {".post_attention_layernorm.output[0]", Layout::Hidden},
    {".mlp.input", Layout::Hidden},
    {".mlp.gate_up_proj.output[0]", Layout::FusedGateUp},
    {".mlp.act_fn.output", Layout::Columns},
    {".mlp.down_proj.input", Layout::Columns},
    {".mlp.down_proj.output[0]", Layout::Hidden},
    {".mlp.output", Layout::Hidden},
    {".output[0]", Layout::Hidden},
};

// A sparse layer's (Qwen3-MoE, core/model/families/qwen3_moe.cpp): the same up to mlp.input, then
// the router's logits (replicated), the experts' output (a per-rank partial sum, read reduced) and
// the block's output.
constexpr size_t kMlpInput = 11;  // .mlp.input's order in both lists
constexpr size_t kRouter = kMlpInput + 1, kExperts = kMlpInput + 2;
const std::vector<PortDef> kSparseLayerPorts = [] {
  std::vector<PortDef> ports(kLayerPorts.begin(), kLayerPorts.begin() + kMlpInput + 1);
  ports.push_back({".mlp.gate.output[0]", Layout::Router});
  ports.push_back({".mlp.experts.output", Layout::Hidden});
  ports.push_back({".mlp.output", Layout::Hidden});
  ports.push_back({".output[0]", Layout::Hidden});
  return ports;
}();

const std::vector<std::string> kScales = {"0.5", "1.5", "-1.0", "0.25", "2.0"};
const std::vector<std::string> kShifts = {"0.1", "-0.5", "1.0", "0.03"};
// Router logits are scaled by these only: a negative scale would turn an ablated expert's -inf
// into +inf, and the softmax into NaN.
const std::vector<std::string> kPositiveScales = {"0.5", "1.5", "0.25", "2.0"};

}  // namespace

// Functions every script defines on the driver before its traces; blocks call them on every rank
// (each rank runs its own copy), with a default and a keyword-only parameter.
const char* const kDriverFunctions =
    "def last_rows(x, n=1):\n"
    "    return x[-n:].clone()\n"
    "\n"
    "def scaled(x, *, by):\n"
    "    return x * by\n"
    "\n";

const std::vector<PortDef>& PortStatements::portsOf(int layer) const {
  return m_.isSparse(layer) ? kSparseLayerPorts : kLayerPorts;
}

int PortStatements::orderOf(int layer, const std::string& suffix) const {
  const auto& ports = portsOf(layer);
  for (size_t i = 0; i < ports.size(); ++i) {
    if (ports[i].suffix == suffix) return int(i);
  }
  return int(ports.size());  // not a port of this layer: after all of them
}

std::string PortStatements::layerExpr(int i) {
  if (i == m_.layers - 1 && rng_.chance(0.3)) return "model.model.layers[-1]";
  return "model.model.layers[" + std::to_string(i) + "]";
}

Port PortStatements::layerPort(int layer, size_t order) {
  const PortDef& d = portsOf(layer)[order];
  Port p;
  p.position = layer * kLayerStride + int(order);
  p.layer = layerExpr(layer);
  p.suffix = d.suffix;
  if (p.suffix == ".input_layernorm.output" && layer > 0) p.suffix += "[0]";
  if (p.suffix.size() > 6 && p.suffix.compare(p.suffix.size() - 6, 6, ".input") == 0 &&
      rng_.chance(0.2)) {
    p.suffix += "s[0]";  // .inputs[0] is .input
  }
  p.expr = p.layer + p.suffix;
  p.layout = d.layout;
  p.width = m_.hidden;
  const std::string s = d.suffix;
  if (s == ".self_attn.attn.output" || s == ".self_attn.o_proj.input") {
    p.width = m_.heads * m_.headDim;
  } else if (s == ".mlp.act_fn.output" || s == ".mlp.down_proj.input") {
    p.width = m_.intermediate;
  } else if (s == ".self_attn.q_norm.output") {
    p.width = m_.heads;
  } else if (s == ".self_attn.k_norm.output") {
    p.width = m_.kvHeads;
  } else if (s == ".mlp.gate.output[0]") {
    p.width = m_.experts;
  }
  if (s == ".output[0]" && rng_.chance(0.3)) {  // the residual stream, as the logit lens reads it
    p.expr = "sum(" + p.layer + ".output)";
    p.readOnly = true;
  }
  return p;
}

Port PortStatements::randomPort() {
  if (rng_.chance(0.08)) {
    Port p;
    p.position = m_.layers * kLayerStride;
    p.expr = "model.model.norm.output[0]";
    p.width = m_.hidden;
    return p;
  }
  if (rng_.chance(0.05)) {
    Port p;
    p.position = logitsPosition() + 1;
    p.expr = "model.samples";
    p.layout = Layout::Samples;
    return p;
  }
  for (;;) {
    size_t order = size_t(rng_.below(int(kLayerPorts.size())));
    if (!m_.qkNorm && (order == 4 || order == 5)) continue;
    const int layer = rng_.below(m_.layers);
    // A sparse layer's router and experts (2 of its 16 ports) come up about 43 % of the time
    // (0.35 + 0.65 * 2 / 16). Its order is drawn again (the first draw was for a dense layer's
    // list), so a model without sparse layers draws as before.
    if (m_.isSparse(layer)) {
      order = rng_.chance(0.35) ? (rng_.chance(0.5) ? kRouter : kExperts)
                                : size_t(rng_.below(int(kSparseLayerPorts.size())));
    }
    if (!m_.qkNorm && (order == 4 || order == 5)) continue;
    return layerPort(layer, order);
  }
}

// A column slice [a:b] inside `width`.
std::string PortStatements::slice(int width) {
  const int a = rng_.below(std::min(width, 16));
  const int b = a + 1 + rng_.below(std::min(8, width - a));
  return std::to_string(a) + ":" + std::to_string(b);
}

// A slice to read: at least 16 columns (or all), so that its largest value sets a scale for
// the comparison rather than one element that may sit near zero.
std::string PortStatements::readSlice(int width) {
  const int w = std::min(width, 16 + rng_.below(16));
  const int a = rng_.below(width - w + 1);
  return std::to_string(a) + ":" + std::to_string(a + w);
}

std::string PortStatements::scale() {
  if (!scaleName_.empty() && rng_.chance(0.3)) return scaleName_;
  return rng_.pick(kScales);
}

// ---- reads and writes of one port's value, held in `x` ----

std::string PortStatements::readOf(const Port& p, const std::string& x) {
  const std::string attn = p.layer + ".self_attn";
  switch (p.layout) {
    case Layout::Hidden:
      switch (rng_.below(7)) {
        case 0:
          return lastRow(x);
        case 1:
          return x + ".abs().sum(-1)";  // no cancellation to amplify rounding
        case 2:
          feature("call-norm");
          return "model.model.norm(" + x + ")";
        case 3:
          feature("call-mlp");
          return layerExpr(rng_.below(m_.layers)) + ".mlp(" + x + ")";
        case 4:
          feature("logit-lens");
          return "model.logits_processor(model.lm_head, model.model.norm(" + x + "))[-1:]";
        default:
          return x + ".clone()";
      }
    case Layout::Columns:
      if (rng_.chance(0.4)) return x + "[:, " + readSlice(p.width) + "].clone()";
      return rng_.chance(0.3) ? lastRow(x) : x + ".clone()";
    case Layout::OProjInput:
      if (rng_.chance(0.4)) {
        feature("head-accessor");
        return attn + ".o_proj.head(" + x + ", " + std::to_string(rng_.below(m_.heads)) +
               ").clone()";
      }
      return rng_.chance(0.3) ? x + "[:, " + readSlice(p.width) + "].clone()" : x + ".clone()";
    case Layout::Heads:
      if (rng_.chance(0.4)) return x + "[:, " + std::to_string(rng_.below(p.width)) + "].clone()";
      if (rng_.chance(0.3)) return headsComprehension(x, p.width);
      return x + ".clone()";
    case Layout::FusedQkv: {
      feature("head-accessor");
      const int which = rng_.below(4);
      if (which == 3) return x + ".sort(-1)[0]";
      const char* name = which == 0 ? "q_head" : which == 1 ? "k_head" : "v_head";
      const int h = rng_.below(which == 0 ? m_.heads : m_.kvHeads);
      return attn + ".qkv_proj." + name + "(" + x + ", " + std::to_string(h) + ").clone()";
    }
    case Layout::FusedGateUp:
      return rng_.chance(0.5) ? x + ".sort(-1)[0]" : x + ".abs().sum(-1)";
    case Layout::Samples:
      return x + ".clone()";
    case Layout::Router:  // probabilities: an expert ablated to -inf reads as 0
      switch (rng_.below(3)) {
        case 0:
          return x + ".softmax(-1)[-1:].clone()";
        case 1:
          return x + ".softmax(-1)[:, " + slice(p.width) + "].clone()";
        default:
          return x + ".softmax(-1).clone()";
      }
  }
  return x + ".clone()";
}

// A copy of the value's last row, now and then through the script's driver function.
std::string PortStatements::lastRow(const std::string& x) {
  if (!later_.chance(0.3)) return x + "[-1:].clone()";
  feature("driver-function");
  return later_.chance(0.5) ? "last_rows(" + x + ")" : "last_rows(" + x + ", n=1)";
}

// The heads of a [T, heads, head_dim] value walked by a comprehension: a list comprehension with
// a condition, a generator summed, or a dict comprehension's values.
std::string PortStatements::headsComprehension(const std::string& x, int heads) {
  feature("comprehension");
  const std::string range = " for h in range(" + std::to_string(heads) + ")";
  switch (rng_.below(3)) {
    case 0:
      return "torch.stack([" + x + "[:, h]" + range + " if h % 2 == 0], 1)";
    case 1:
      return "sum(" + x + "[:, h].abs().sum(-1)" + range + ")";
    default:
      return "torch.stack(list({h: " + x + "[:, h]" + range + "}.values()), 1)";
  }
}

std::vector<std::string> PortStatements::writeOf(const Port& p, const std::string& x) {
  const std::string attn = p.layer + ".self_attn";
  feature("write");
  switch (p.layout) {
    case Layout::Hidden:
      switch (rng_.below(4)) {
        case 0:
          if (later_.chance(0.3)) {
            feature("driver-function");
            return {x + "[:] = scaled(" + x + ", by=" + scale() + ")"};
          }
          return {x + " *= " + scale()};
        case 1:
          return {x + " += " + rng_.pick(kShifts)};
        case 2:
          return {x + "[-1:] = " + x + "[-1:] * " + scale()};
        default:
          return {x + "[:, " + slice(p.width) + "] = 0"};
      }
    case Layout::Columns:
      switch (rng_.below(4)) {
        case 0:
          return {x + " *= " + scale()};
        case 1:
          return {x + ".zero_()"};
        case 2:
          return {x + " += " + rng_.pick(kShifts)};
        default:
          return {x + "[:, " + slice(p.width) + "] = 0"};
      }
    case Layout::OProjInput:
      if (rng_.chance(0.5)) {
        feature("head-accessor");
        return {attn + ".o_proj.head(" + x + ", " + std::to_string(rng_.below(m_.heads)) +
                ")[:] = 0"};
      }
      return {x + "[:, " + slice(p.width) + "] = 0"};
    case Layout::Heads:
      if (rng_.chance(0.5)) return {x + "[:, " + std::to_string(rng_.below(p.width)) + "] = 0"};
      return {x + " *= " + scale()};
    case Layout::FusedQkv: {
      if (rng_.chance(0.3)) return {x + " *= " + scale()};
      feature("head-accessor");
      const int which = rng_.below(3);
      const char* name = which == 0 ? "q_head" : which == 1 ? "k_head" : "v_head";
      const int h = rng_.below(which == 0 ? m_.heads : m_.kvHeads);
      const std::string head =
          attn + ".qkv_proj." + name + "(" + x + ", " + std::to_string(h) + ")";
      return {rng_.chance(0.5) ? head + "[:] = 0" : head + ".mul_(" + scale() + ")"};
    }
    case Layout::FusedGateUp:
      return {rng_.chance(0.5) ? x + " *= " + scale() : x + " += " + rng_.pick(kShifts)};
    case Layout::Samples:
      feature("forced-sample");
      return {x + "[:] = 9625"};
    case Layout::Router:
      switch (rng_.below(4)) {
        case 0:  // no token routes to this expert, as the routing view's ablation does. The last
                 // expert is never ablated, so every token keeps a finite logit however many
                 // writes a script holds: with all of a row at -inf the softmax is NaN.
          if (p.width < 2) return {x + " *= " + rng_.pick(kPositiveScales)};
          feature("expert-ablation");
          return {x + "[:, " + std::to_string(rng_.below(p.width - 1)) + "] = float(\"-inf\")"};
        case 1:
          return {x + " *= " + rng_.pick(kPositiveScales)};
        case 2:
          return {x + "[:, " + slice(p.width) + "] = 0"};
        default:
          return {x + " += " + rng_.pick(kShifts)};
      }
  }
  return {};
}

Item PortStatements::portItem(const Port& p, int invoke) {
  const std::string x = "x" + std::to_string(invoke), r = "r" + std::to_string(invoke);
  Item it;
  it.position = p.position;
  it.lines.push_back(x + " = " + p.expr);
  const int kind = p.readOnly ? 0 : rng_.below(10);
  if (kind >= 6) {
    for (auto& l : writeOf(p, x)) it.lines.push_back(l);
  }
  if (kind < 6 || kind >= 8) it.lines.push_back(saveRead(p, invoke, x));
  return it;
}

// A read kept in the invoke's list (most), appended as the port's view without a copy, or
// saved under a name of its own (the last step's value is what the trace reports).
std::string PortStatements::saveRead(const Port& p, int invoke, const std::string& x) {
  const std::string j = std::to_string(invoke);
  const int how = rng_.below(20);
  // A fused view is in rank order; a router view may hold an ablated expert's -inf.
  const bool noView =
      p.layout == Layout::FusedQkv || p.layout == Layout::FusedGateUp || p.layout == Layout::Router;
  // attn.output and act_fn.output are the tensors o_proj and down_proj then read: a view kept
  // past a write there shows it at tp=1 only (docs/trace-language.md, Writes), so a copy is kept
  // instead (drawing nothing more, so the rest of the script is as a seed made it before).
  const bool sharedWithNext =
      p.suffix == ".self_attn.attn.output" || p.suffix == ".mlp.act_fn.output";
  if (how == 0 && !p.readOnly && !noView) {
    if (sharedWithNext) return "r" + j + ".append(" + x + ".clone())";
    feature("append-view");
    return "r" + j + ".append(" + x + ")";
  }
  if (how < 4) {
    feature("direct-save");
    return "v" + j + "_" + std::to_string(saved_++) + " = " + readOf(p, x) + ".save()";
  }
  return "r" + j + ".append(" + readOf(p, x) + ")";
}

// ---- deliberate errors ----

Item PortStatements::errorItem(int invoke) {
  const std::string x = "x" + std::to_string(invoke), r = "r" + std::to_string(invoke);
  Item it;
  const int layer = rng_.below(m_.layers);
  const std::string l = layerExpr(layer);
  switch (rng_.below(4)) {
    case 0: {  // read a port the model already passed in this step
      error_ = "ran-past";
      const size_t later = size_t(rng_.between(1, int(portsOf(layer).size()) - 1));
      size_t earlier = size_t(rng_.below(int(later)));
      if (!m_.qkNorm && (earlier == 4 || earlier == 5)) earlier = 3;
      const Port q = layerPort(layer, later == 4 || later == 5 ? 6 : later);
      const Port p = layerPort(layer, earlier);
      it.position = q.position;
      it.lines = {x + " = " + q.expr, r + ".append(" + x + ".sum())", x + " = " + p.expr};
      break;
    }
    case 1: {
      error_ = "unknown-module";
      const std::vector<std::string> typos = {".mlp.down_prj.output", ".self_atn.output",
                                              ".mlp.gate_up.output[0]", ".self_attn.o_prj.input"};
      it.position = layer * kLayerStride;
      it.lines = {x + " = " + l + rng_.pick(typos)};
      break;
    }
    case 2: {
      error_ = "wrong-shape";
      if (rng_.chance(0.5)) {
        it.position = layer * kLayerStride + orderOf(layer, ".mlp.output");
        it.lines = {l + ".mlp.output = torch.zeros(3, 3)"};
      } else {
        it.position = layer * kLayerStride + 6;
        it.lines = {l + ".self_attn.attn.output = torch.zeros(2, 5)"};
      }
      break;
    }
    default: {
      error_ = "layer-out-of-range";
      it.position = 0;
      it.lines = {x + " = model.model.layers[" + std::to_string(m_.layers + rng_.below(3)) +
                  "].output[0]"};
      break;
    }
  }
  return it;
}

const std::string& PortStatements::scaleConstant() {
  return rng_.pick(kScales);
}

std::string PortStatements::takeFeatures() {
  std::string joined;
  for (const auto& f : features_) joined += (joined.empty() ? "" : ",") + f;
  features_.clear();
  return joined;
}

}  // namespace shardscope::soak
