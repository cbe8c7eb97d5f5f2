// PortStatements: what a generated trace script does at one port of the model (issue 14's soak
// generator, trace_script_generator.h). It knows the ports a script may name (a decoder layer's
// in model order, the final norm, model.samples), where each comes in a step, and for each port's
// layout the reads and writes that mean the same at every tp; it also writes the one deliberate
// error a script may hold. Every choice draws from the generator's Rng, in a fixed order, so a
// seed still names one script.
#pragma once

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "soak/soak_rng.h"
#include "soak/trace_script_generator.h"

namespace shardscope::soak {

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
  Router,       // [T, experts] router logits (mlp.gate.output[0]), replicated on every rank
};

// A decoder layer's port: its expression after model.model.layers[i], and its layout.
struct PortDef {
  const char* suffix;
  Layout layout;
};

// The driver functions every generated script defines (last_rows, scaled), which port statements
// may call.
extern const char* const kDriverFunctions;

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

class PortStatements {
 public:
  // `seed` (the script's) seeds the draws added since seeds were first logged (the driver
  // functions' use), kept apart from `rng` so that a logged seed still makes its script.
  PortStatements(Rng& rng, const ModelShape& model, uint64_t seed)
      : rng_(rng), later_(seed ^ 0x5deece66dull), m_(model) {}

  // model.model.layers[i], now and then as layers[-1] for the last.
  std::string layerExpr(int i);
  // Where model.logits comes in a step (after every layer and the final norm).
  int logitsPosition() const { return m_.layers * kLayerStride + 1; }
  // Port `order` of layer `layer`'s ports (a dense or a sparse MLP's), with its width and
  // expression.
  Port layerPort(int layer, size_t order);
  Port randomPort();
  // Invoke `invoke`'s statements at `p`: a read saved or kept, a write, or both.
  Item portItem(const Port& p, int invoke);
  // One deliberate error in invoke `invoke`; error() names its kind afterwards.
  Item errorItem(int invoke);
  const std::string& error() const { return error_; }

  // A plain value the driver computes before the invokes, which the blocks may use as a scale
  // ("" for none).
  void setScaleName(std::string name) { scaleName_ = std::move(name); }
  const std::string& scaleName() const { return scaleName_; }
  // A scale constant for the driver to set scaleName() to.
  const std::string& scaleConstant();

  // Notes what a trace exercises, for its summary line; takeFeatures() returns them joined by
  // commas and starts afresh.
  void feature(const std::string& f) { features_.insert(f); }
  std::string takeFeatures();

 private:
  const std::vector<PortDef>& portsOf(int layer) const;
  // Where `suffix` comes among layer `layer`'s ports.
  int orderOf(int layer, const std::string& suffix) const;
  std::string slice(int width);
  std::string readSlice(int width);
  std::string scale();
  std::string readOf(const Port& p, const std::string& x);
  std::string lastRow(const std::string& x);
  std::string headsComprehension(const std::string& x, int heads);
  std::vector<std::string> writeOf(const Port& p, const std::string& x);
  std::string saveRead(const Port& p, int invoke, const std::string& x);

  Rng& rng_;
  Rng later_;
  const ModelShape& m_;
  std::set<std::string> features_;
  int saved_ = 0;  // names of direct saves
  std::string error_;
  std::string scaleName_;
};

}  // namespace shardscope::soak
