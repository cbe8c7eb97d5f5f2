#include "expert_routing.h"

#include <QRegularExpression>
#include <QString>
#include <algorithm>
#include <map>

#include "saved_values.h"

namespace shardscope::ui {
namespace {

// Whether every chosen id is an expert in [0, experts).
bool idsWithin(const ExpertRouting& routing, int64_t experts) {
  for (const auto& layer : routing.experts) {
    for (int64_t e : layer) {
      if (e < 0 || e >= experts) return false;
    }
  }
  return true;
}

// Fills routing's probabilities from router_probs_L when every layer saved them with one shape
// ([tokens, E], E covering every chosen id); otherwise leaves them empty, as for older runs.
void readProbabilities(const trace::RunResult& r, ExpertRouting& routing) {
  std::vector<std::vector<double>> probabilities;
  int64_t experts = 0;
  for (size_t row = 0; row < routing.layers.size(); ++row) {
    const auto* v = findValue(r, "router_probs_" + std::to_string(routing.layers[row]));
    if (!v || !v->hasData()) return;
    Matrix p = asMatrix(v->tensor);
    if (p.rows != routing.tokens || (experts != 0 && p.cols != experts)) return;
    experts = p.cols;
    probabilities.push_back(std::move(p.data));
  }
  if (!idsWithin(routing, experts)) return;
  routing.numExperts = experts;
  routing.probabilities = std::move(probabilities);
}

}  // namespace

std::optional<ExpertRouting> expertRoutingOf(const trace::RunResult& r) {
  static const QRegularExpression idsName(R"(^route_(\d+)\[1\]$)");
  std::map<int64_t, std::pair<const trace::SavedValue*, const trace::SavedValue*>> found;
  if (r.traces.empty()) return std::nullopt;
  for (const auto& v : r.traces.back().values) {
    const auto m = idsName.match(QString::fromStdString(v.name));
    if (!m.hasMatch() || !v.hasData()) continue;
    const int64_t layer = m.captured(1).toLongLong();
    const auto* w = findValue(r, "route_" + std::to_string(layer) + "[0]");
    if (w) found[layer] = {w, &v};
  }
  if (found.empty()) return std::nullopt;
  ExpertRouting out;
  for (const auto& [layer, values] : found) {
    const Matrix w = asMatrix(values.first->tensor);
    const Matrix ids = asMatrix(values.second->tensor);
    if (w.rows != ids.rows || w.cols != ids.cols) return std::nullopt;
    if (out.layers.empty()) {
      out.tokens = ids.rows;
      out.topK = ids.cols;
    } else if (ids.rows != out.tokens || ids.cols != out.topK) {
      return std::nullopt;
    }
    out.layers.push_back(layer);
    std::vector<int64_t> e;
    e.reserve(ids.data.size());
    for (double x : ids.data) e.push_back(int64_t(x));
    out.experts.push_back(std::move(e));
    out.weights.push_back(w.data);
  }
  readProbabilities(r, out);
  return out;
}

std::vector<int64_t> ExpertRouting::load(size_t row, int64_t numExperts) const {
  std::vector<int64_t> count(size_t(std::max<int64_t>(numExperts, 0)), 0);
  for (int64_t e : experts[row]) {
    if (e >= 0 && e < numExperts) ++count[size_t(e)];
  }
  return count;
}

double ExpertRouting::chosenMass(size_t row, int64_t token) const {
  double mass = 0;
  for (int64_t k = 0; k < topK; ++k) mass += probability(row, token, expert(row, token, k));
  return mass;
}

int64_t maxExpert(const ExpertRouting& routing) {
  int64_t top = -1;
  for (const auto& layer : routing.experts) {
    for (int64_t e : layer) top = std::max(top, e);
  }
  return top;
}

std::vector<int64_t> sparseLayers(const ModelInfo& model) {
  std::vector<int64_t> layers;
  for (const auto& m : model.modules) {
    if (m.layer >= 0 && m.kind == "FusedMoE") layers.push_back(m.layer);
  }
  return layers;
}

}  // namespace shardscope::ui
