#include "expert_routing.h"

#include <QRegularExpression>
#include <QString>
#include <algorithm>
#include <map>

#include "saved_values.h"

namespace shardscope::ui {

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
  return out;
}

int64_t maxExpert(const ExpertRouting& routing) {
  int64_t top = -1;
  for (const auto& layer : routing.experts) {
    for (int64_t e : layer) top = std::max(top, e);
  }
  return top;
}

std::vector<int64_t> sparseLayers(const ModelInfo& model) {
  static const QRegularExpression experts(R"(^model\.model\.layers\[(\d+)\]\.mlp\.experts$)");
  std::vector<int64_t> layers;
  for (const auto& m : model.modules) {
    const auto match = experts.match(QString::fromStdString(m.path));
    if (match.hasMatch()) layers.push_back(match.captured(1).toLongLong());
  }
  return layers;
}

}  // namespace shardscope::ui
