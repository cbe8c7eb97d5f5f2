#include "trace_script_generator.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <set>
#include <sstream>
#include <vector>

namespace shardscope::soak {
namespace {

// splitmix64 and plain modulo: the same numbers on every platform and standard library.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  int below(int n) { return n <= 1 ? 0 : int(next() % uint64_t(n)); }
  int between(int lo, int hi) { return lo + below(hi - lo + 1); }  // inclusive
  bool chance(double p) { return double(next() >> 11) * 0x1.0p-53 < p; }
  template <class T>
  const T& pick(const std::vector<T>& v) {
    return v[size_t(below(int(v.size())))];
  }

 private:
  uint64_t state_;
};

// How a port's value is laid out, which decides the reads and writes that mean the same at
// every tp.
enum class Layout {
  Hidden,       // [T, hidden], whole
  Columns,      // [T, width], gathered in feature order (attn.output, act_fn.output, ...)
  OProjInput,   // [T, heads * head_dim]; o_proj.head(z, h) applies
  Heads,        // [T, heads, head_dim] (q_norm, k_norm), gathered along heads
  FusedQkv,     // rank-order [q0 k0 v0 | q1 k1 v1]: accessors, sorting or whole edits only
  FusedGateUp,  // rank-order [g0 u0 | g1 u1]: sorting or whole edits only
  Samples,      // [1] sampled id
};

struct PortDef {
  const char* suffix;  // after model.model.layers[i]
  Layout layout;
};

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
constexpr int kLayerStride = 100;  // position = layer * stride + order

// A port as a script names it, with where it comes in a step.
struct Port {
  int position = 0;
  std::string expr;   // model.model.layers[1].mlp.output
  std::string layer;  // model.model.layers[1] ("" for model-level ports)
  std::string suffix;
  Layout layout = Layout::Hidden;
  int width = 0;          // last dimension; heads for Layout::Heads
  bool readOnly = false;  // the expression is not a view of the port (sum(layer.output))
};

// Statements that run while the model is at one port (or at none, for stop).
struct Item {
  int position = 0;
  int step = -1;  // run only at this step of the loop (-1: every step)
  std::vector<std::string> lines;
};

// How an invoke's block covers the request's steps. Every step gets a logits row.
enum class Mode { Flat, Unbounded, Range, Single };

struct InvokePlan {
  Mode mode = Mode::Unbounded;
  int first = 0, last = 0;  // steps the main body runs at, inclusive
  int stopAt = -1;          // tracer.stop() at this step
  bool saveAtStart = false;
  bool result = false;
  std::vector<Item> items;
};

const std::vector<std::string> kPrompts = {
    "\"The capital of France is\"",
    "\"Hello\"",
    "\"Once upon a time\"",
    "\"1 2 3 4 5 6\"",
    "\"The quick brown fox jumps over the lazy dog\"",
    "\"def f(x):\"",
    "\"Paris\"",
    "[785, 6722, 315]",
    "[9707]",
};
const std::vector<std::string> kScales = {"0.5", "1.5", "-1.0", "0.25", "2.0"};
const std::vector<std::string> kShifts = {"0.1", "-0.5", "1.0", "0.03"};

class Generator {
 public:
  Generator(uint64_t seed, const GeneratorOptions& o) : rng_(seed), o_(o), m_(o.model) {}

  GeneratedScript run(uint64_t seed) {
    out_ << "model = VLLM(\"" << o_.modelName << "\""
         << (o_.enforceEager ? ", enforce_eager=True" : "") << ")\n";
    const int traces = rng_.between(1, std::max(1, o_.maxTraces));
    const bool wantError = rng_.chance(o_.errorProbability);
    errorTrace_ = wantError ? rng_.below(traces) : -1;
    for (int t = 0; t < traces; ++t) trace(t);
    GeneratedScript g;
    g.seed = seed;
    g.text = out_.str();
    g.error = error_;
    for (const auto& f : summary_) g.summary += (g.summary.empty() ? "" : " ") + f;
    if (!error_.empty()) g.summary += " error=" + error_;
    return g;
  }

 private:
  Rng rng_;
  const GeneratorOptions& o_;
  const ModelShape& m_;
  std::ostringstream out_;
  std::vector<std::string> summary_;
  std::set<std::string> features_;
  int errorTrace_ = -1;
  int saved_ = 0;  // names of direct saves
  std::string error_;
  std::string scaleName_;  // a driver constant the blocks may use ("" for none)

  // ---- ports ----

  std::string layerExpr(int i) {
    if (i == m_.layers - 1 && rng_.chance(0.3)) return "model.model.layers[-1]";
    return "model.model.layers[" + std::to_string(i) + "]";
  }

  int logitsPosition() const { return m_.layers * kLayerStride + 1; }

  Port layerPort(int layer, size_t order) {
    const PortDef& d = kLayerPorts[order];
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
    }
    if (s == ".output[0]" && rng_.chance(0.3)) {  // the residual stream, as the logit lens reads it
      p.expr = "sum(" + p.layer + ".output)";
      p.readOnly = true;
    }
    return p;
  }

  Port randomPort() {
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
      const size_t order = size_t(rng_.below(int(kLayerPorts.size())));
      if (!m_.qkNorm && (order == 4 || order == 5)) continue;
      return layerPort(rng_.below(m_.layers), order);
    }
  }

  // A column slice [a:b] inside `width`.
  std::string slice(int width) {
    const int a = rng_.below(std::min(width, 16));
    const int b = a + 1 + rng_.below(std::min(8, width - a));
    return std::to_string(a) + ":" + std::to_string(b);
  }

  // A slice to read: at least 16 columns (or all), so that its largest value sets a scale for
  // the comparison rather than one element that may sit near zero.
  std::string readSlice(int width) {
    const int w = std::min(width, 16 + rng_.below(16));
    const int a = rng_.below(width - w + 1);
    return std::to_string(a) + ":" + std::to_string(a + w);
  }

  std::string scale() {
    if (!scaleName_.empty() && rng_.chance(0.3)) return scaleName_;
    return rng_.pick(kScales);
  }

  void feature(const std::string& f) { features_.insert(f); }

  // ---- reads and writes of one port's value, held in `x` ----

  std::string readOf(const Port& p, const std::string& x) {
    const std::string attn = p.layer + ".self_attn";
    switch (p.layout) {
      case Layout::Hidden:
        switch (rng_.below(7)) {
          case 0:
            return x + "[-1:].clone()";
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
        return rng_.chance(0.3) ? x + "[-1:].clone()" : x + ".clone()";
      case Layout::OProjInput:
        if (rng_.chance(0.4)) {
          feature("head-accessor");
          return attn + ".o_proj.head(" + x + ", " + std::to_string(rng_.below(m_.heads)) +
                 ").clone()";
        }
        return rng_.chance(0.3) ? x + "[:, " + readSlice(p.width) + "].clone()" : x + ".clone()";
      case Layout::Heads:
        if (rng_.chance(0.4)) return x + "[:, " + std::to_string(rng_.below(p.width)) + "].clone()";
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
    }
    return x + ".clone()";
  }

  std::vector<std::string> writeOf(const Port& p, const std::string& x) {
    const std::string attn = p.layer + ".self_attn";
    feature("write");
    switch (p.layout) {
      case Layout::Hidden:
        switch (rng_.below(4)) {
          case 0:
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
    }
    return {};
  }

  Item portItem(const Port& p, int invoke) {
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
  std::string saveRead(const Port& p, int invoke, const std::string& x) {
    const std::string j = std::to_string(invoke);
    const int how = rng_.below(20);
    const bool fused = p.layout == Layout::FusedQkv || p.layout == Layout::FusedGateUp;
    if (how == 0 && !p.readOnly && !fused) {  // a fused view is in rank order: not comparable
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

  Item errorItem(int invoke) {
    const std::string x = "x" + std::to_string(invoke), r = "r" + std::to_string(invoke);
    Item it;
    const int layer = rng_.below(m_.layers);
    const std::string l = layerExpr(layer);
    switch (rng_.below(4)) {
      case 0: {  // read a port the model already passed in this step
        error_ = "ran-past";
        const size_t later = size_t(rng_.between(1, int(kLayerPorts.size()) - 1));
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
          it.position = layer * kLayerStride + 16;
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

  // ---- one invoke's block ----

  InvokePlan plan(int steps) {
    InvokePlan p;
    const int m = rng_.below(10);
    if (m < 2) {
      p.mode = Mode::Flat;
    } else if (m < 6) {
      p.mode = Mode::Unbounded;
    } else if (m < 9) {
      p.mode = Mode::Range;
    } else {
      p.mode = Mode::Single;
    }
    if (p.mode == Mode::Flat) {
      p.first = p.last = 0;
    } else if (p.mode == Mode::Unbounded) {
      p.first = 0;
      p.last = steps - 1;
    } else if (p.mode == Mode::Range) {
      p.first = rng_.below(steps);
      p.last = rng_.between(p.first, steps - 1);
    } else {
      p.first = p.last = rng_.below(steps);
    }
    if ((p.mode == Mode::Unbounded || p.mode == Mode::Flat) && rng_.chance(0.3)) {
      p.stopAt = p.mode == Mode::Flat ? 0 : rng_.below(steps);
      feature("stop");
    }
    p.saveAtStart = rng_.chance(0.3);
    p.result = rng_.chance(0.5);
    return p;
  }

  void fillItems(InvokePlan& p, int invoke) {
    const int n = rng_.below(5);
    for (int k = 0; k < n; ++k) {
      Item it = portItem(randomPort(), invoke);
      if (p.mode != Mode::Flat && p.last > p.first && rng_.chance(0.25)) {
        it.step = rng_.between(p.first, p.last);
        feature("step-condition");
      }
      p.items.push_back(std::move(it));
    }
  }

  void emitItems(std::vector<Item> items, int invoke, const std::string& indent,
                 const std::string& stepVar) {
    Item logits;
    logits.position = logitsPosition();
    logits.lines = {"lg" + std::to_string(invoke) + ".append(model.logits.clone())"};
    items.insert(items.begin(), logits);
    std::stable_sort(items.begin(), items.end(),
                     [](const Item& a, const Item& b) { return a.position < b.position; });
    for (const Item& it : items) {
      std::string in = indent;
      if (it.step >= 0) {
        out_ << indent << "if " << stepVar << " == " << it.step << ":\n";
        in += "    ";
      }
      for (const auto& l : it.lines) out_ << in << l << "\n";
    }
  }

  void emitBlock(const InvokePlan& p, int invoke, int steps, const std::string& ind) {
    const std::string j = std::to_string(invoke), r = "r" + j, lg = "lg" + j, i = "i" + j;
    const std::string in2 = ind + "    ";
    if (p.saveAtStart) {
      out_ << ind << r << " = list().save()\n" << ind << lg << " = list().save()\n";
    } else {
      out_ << ind << r << " = []\n" << ind << lg << " = []\n";
    }
    const auto cover = [&](int a, int b) {  // logits only, steps a .. b - 1 (b < 0: to the end)
      if (b >= 0 && a >= b) return;
      std::string range;
      if (b < 0) {
        range = std::to_string(a) + ":";
      } else if (a == 0 && rng_.chance(0.5)) {
        range = ":" + std::to_string(b);
      } else {
        range = std::to_string(a) + ":" + std::to_string(b);
      }
      out_ << ind << "for _ in tracer.iter[" << range << "]:\n"
           << in2 << lg << ".append(model.logits.clone())\n";
    };
    std::vector<Item> items = p.items;
    if (p.stopAt >= 0) {
      Item stop;
      stop.position = logitsPosition() + 2;
      stop.step = p.mode == Mode::Flat ? -1 : p.stopAt;
      stop.lines = {"tracer.stop()"};
      items.push_back(stop);
    }
    switch (p.mode) {
      case Mode::Flat:
        emitItems(items, invoke, ind, "");
        if (steps > 1) cover(1, p.stopAt >= 0 || rng_.chance(0.5) ? -1 : steps);
        break;
      case Mode::Unbounded:
        out_ << ind << "for " << i << " in tracer.iter[" << (rng_.chance(0.3) ? "0:" : ":")
             << "]:\n";
        emitItems(items, invoke, in2, i);
        break;
      case Mode::Range:
      case Mode::Single:
        feature("iter-range");
        cover(0, p.first);
        if (p.mode == Mode::Single) {
          out_ << ind << "for " << i << " in tracer.iter[" << p.first << "]:\n";
        } else {
          out_ << ind << "for " << i << " in tracer.iter[" << p.first << ":" << p.last + 1
               << "]:\n";
        }
        emitItems(items, invoke, in2, i);
        if (p.last + 1 < steps) cover(p.last + 1, rng_.chance(0.5) ? -1 : steps);
        break;
    }
    if (!p.saveAtStart)
      out_ << ind << r << " = " << r << ".save()\n" << ind << lg << " = " << lg << ".save()\n";
    if (p.result) out_ << ind << "out" << j << " = tracer.result.save()\n";
  }

  // Invoke `src` saves the last row of a port at step 0 and invoke `dst` writes it into its own
  // last row at the same port (TRACE.md section 5: invokes are served in order).
  void addPatch(std::vector<InvokePlan>& plans, int t) {
    std::vector<int> atZero;
    for (int k = 0; k < int(plans.size()); ++k)
      if (plans[k].first == 0) atZero.push_back(k);
    if (atZero.size() < 2) return;
    const int a = rng_.below(int(atZero.size()) - 1);
    const int src = atZero[a], dst = atZero[rng_.between(a + 1, int(atZero.size()) - 1)];
    Port p;
    do {
      p = randomPort();
    } while (p.readOnly || (p.layout != Layout::Hidden && p.layout != Layout::Columns));
    const std::string name = "patch" + std::to_string(t);
    Item s, d;
    s.position = d.position = p.position;
    s.step = plans[src].mode == Mode::Flat || plans[src].last == 0 ? -1 : 0;
    d.step = plans[dst].mode == Mode::Flat || plans[dst].last == 0 ? -1 : 0;
    const std::string xs = "x" + std::to_string(src), xd = "x" + std::to_string(dst);
    s.lines = {xs + " = " + p.expr, name + " = " + xs + "[-1:].clone()"};
    d.lines = {xd + " = " + p.expr, xd + "[-1:] = " + name};
    plans[src].items.push_back(s);
    plans[dst].items.push_back(d);
    feature("patch");
  }

  void trace(int t) {
    const int steps = rng_.between(1, std::max(1, o_.maxTokens));
    const int invokes = rng_.between(1, std::max(1, o_.maxInvokes));
    const bool implicit = invokes == 1 && rng_.chance(0.5);
    std::string params = "max_tokens=" + std::to_string(steps) + ", ignore_eos=True";
    std::string sampling = "greedy";
    if (rng_.chance(0.4)) {
      sampling = "seeded";
      params += ", temperature=" + std::string(rng_.chance(0.5) ? "0.8" : "1.0") +
                ", seed=" + std::to_string(rng_.below(1000));
      if (rng_.chance(0.3)) params += ", top_k=" + std::to_string(rng_.between(2, 50));
      if (rng_.chance(0.3)) params += ", top_p=0.9";
    } else if (rng_.chance(0.3)) {
      params += ", temperature=0.0";
    }
    scaleName_.clear();
    if (!implicit && rng_.chance(0.3)) scaleName_ = "c" + std::to_string(t);
    std::vector<InvokePlan> plans;
    for (int k = 0; k < invokes; ++k) {
      plans.push_back(plan(steps));
      fillItems(plans.back(), k);
    }
    if (invokes > 1 && rng_.chance(0.3)) addPatch(plans, t);
    if (t == errorTrace_) {
      InvokePlan& p = plans[size_t(rng_.below(invokes))];
      Item e = errorItem(int(&p - plans.data()));
      if (p.mode != Mode::Flat && p.last > p.first && rng_.chance(0.3))
        e.step = rng_.between(p.first, p.last);
      p.items.push_back(e);
    }
    if (implicit) {
      out_ << "with model.trace(" << rng_.pick(kPrompts) << ", " << params << ") as tracer:\n";
      emitBlock(plans[0], 0, steps, "    ");
    } else {
      out_ << "with model.trace(" << params << ") as tracer:\n";
      if (!scaleName_.empty())  // a plain value computed on the driver, captured by the blocks
        out_ << "    " << scaleName_ << " = " << rng_.pick(kScales) << "\n";
      for (int k = 0; k < invokes; ++k) {
        out_ << "    with tracer.invoke(" << rng_.pick(kPrompts) << "):\n";
        emitBlock(plans[size_t(k)], k, steps, "        ");
      }
    }
    for (int k = 0; k < invokes; ++k) {
      const std::string j = std::to_string(k);
      out_ << "print(len(r" << j << "), len(lg" << j << "), lg" << j << "[-1].shape)\n";
      if (plans[size_t(k)].result) out_ << "print(out" << j << ".outputs[0].token_ids)\n";
    }
    std::string f;
    for (const auto& x : features_) f += (f.empty() ? "" : ",") + x;
    features_.clear();
    summary_.push_back("[" + std::to_string(invokes) + "x" + std::to_string(steps) + " " +
                       sampling + (f.empty() ? "" : " " + f) + "]");
  }
};

}  // namespace

std::string logitsListName(int invoke) {
  return "lg" + std::to_string(invoke);
}

int invokeOfValue(const std::string& name) {
  for (const char* prefix : {"lg", "out", "r", "v"}) {
    const size_t n = std::strlen(prefix);
    if (name.compare(0, n, prefix) != 0) continue;
    size_t i = n;
    while (i < name.size() && std::isdigit((unsigned char)name[i])) ++i;
    if (i == n || i - n > 3) return -1;
    if (i < name.size() && name[i] != '[' && name[i] != '_') return -1;
    return std::stoi(name.substr(n, i - n));
  }
  return -1;
}

uint64_t scriptSeed(uint64_t runSeed, uint64_t index) {
  uint64_t z = runSeed * 0x9e3779b97f4a7c15ull + index + 1;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return (z ^ (z >> 31)) % 1'000'000'000'000ull;  // short enough to type back
}

GeneratedScript generateTraceScript(uint64_t seed, const GeneratorOptions& options) {
  return Generator(seed, options).run(seed);
}

}  // namespace shardscope::soak
