// RunView: which of the GUI's views a run was made for, and what that view needs (the layer of a
// sweep run, the step of a read, ...). It is recorded with the run, so a run opened from the log
// is shown as it was live without reading meaning out of its title. A script a user wrote has
// none (Kind::None): the GUI then picks a view from the names of the values it saved.
//
// In the log: the runs row's `view` column (schema 5) holds it as JSON, e.g.
// {"kind":"sweep-layer","layer":3,"target":1234}; '' for none, and for runs recorded before.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

namespace shardscope::store {

struct RunView {
  enum class Kind {
    None,
    Generate,
    TopK,
    Read,
    HeadAblation,
    ExpertAblation,
    SweepLayer,
    LogitLens,
    AttentionPattern,
    Routing,
  };
  Kind kind = Kind::None;
  std::string port;     // Read: the module path and port read ("model.model.layers[3].mlp.output")
  int64_t step = 0;     // Read: the generation step read
  int64_t layer = -1;   // SweepLayer, ExpertAblation, AttentionPattern: the decoder layer
  int64_t head = -1;    // AttentionPattern: the query head
  int64_t expert = -1;  // ExpertAblation: the expert ablated
  int64_t target = -1;  // SweepLayer: the token whose probability each zeroed head changes

  bool operator==(const RunView&) const = default;

  // The views, each with what it needs.
  static RunView of(Kind kind) {
    RunView v;
    v.kind = kind;
    return v;
  }
  static RunView read(std::string port, int64_t step) {
    RunView v = of(Kind::Read);
    v.port = std::move(port);
    v.step = step;
    return v;
  }
  static RunView sweepLayer(int64_t layer, int64_t target) {
    RunView v = of(Kind::SweepLayer);
    v.layer = layer;
    v.target = target;
    return v;
  }
  static RunView expertAblation(int64_t layer, int64_t expert) {
    RunView v = of(Kind::ExpertAblation);
    v.layer = layer;
    v.expert = expert;
    return v;
  }
  static RunView attentionPattern(int64_t layer, int64_t head) {
    RunView v = of(Kind::AttentionPattern);
    v.layer = layer;
    v.head = head;
    return v;
  }
};

// The JSON the log keeps ("" for Kind::None).
std::string runViewJson(const RunView& view);
// Reads what runViewJson wrote. "" and a kind this build does not know (a newer ShardScope's
// view) read as Kind::None: the run is then shown by its values. Malformed JSON is a StoreError.
RunView parseRunView(const std::string& json);

}  // namespace shardscope::store
