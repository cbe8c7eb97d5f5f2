// Looking up what a run saved, for the views: a value by name, an invoke's generation, and the
// probabilities of a logits value's last row.
#pragma once

#include <string>
#include <vector>

#include "core/trace/trace_record.h"
#include "result_math.h"

namespace shardscope::ui {

// The saved value `name` of the last trace that saved it.
inline const trace::SavedValue* findValue(const trace::RunResult& r, const std::string& name) {
  for (auto t = r.traces.rbegin(); t != r.traces.rend(); ++t) {
    for (const auto& v : t->values) {
      if (v.name == name && v.hasData()) return &v;
    }
  }
  return nullptr;
}

inline const trace::InvokeRecord* invoke(const trace::RunResult& r, size_t i) {
  if (r.traces.empty() || r.traces.back().invokes.size() <= i) return nullptr;
  return &r.traces.back().invokes[i];
}

// The last row of a logits value, as probabilities.
inline std::vector<double> lastRowProbabilities(const trace::SavedValue& v) {
  const Matrix m = asMatrix(v.tensor);
  if (m.rows == 0) return {};
  return softmax(std::vector<double>(m.data.end() - m.cols, m.data.end()));
}

}  // namespace shardscope::ui
