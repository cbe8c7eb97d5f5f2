#include "value_export.h"

#include <map>

#include "../host_tensor_conversion.h"
#include "../model/safetensors_file.h"

namespace shardscope::store {

ExportReport exportRun(const SessionStore& store, int64_t runId, const std::filesystem::path& out) {
  const RunRecord run = store.run(runId);
  std::map<std::string, int> lastTrace;
  for (size_t ti = 0; ti < run.result.traces.size(); ++ti) {
    for (const auto& v : run.result.traces[ti].values) lastTrace[v.name] = int(ti);
  }
  ExportReport report;
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  for (size_t ti = 0; ti < run.result.traces.size(); ++ti) {
    for (const auto& v : run.result.traces[ti].values) {
      const std::string key =
          lastTrace[v.name] == int(ti) ? v.name : v.name + "@trace" + std::to_string(ti);
      if (!v.isTensor()) {
        report.skipped.push_back(key + ": not a tensor (" + *v.repr + ")");
      } else if (!v.hasData()) {
        report.skipped.push_back(key + ": " + v.note);
      } else {
        tensors.emplace_back(key, fromHost(v.tensor));
        report.written.push_back(key);
      }
    }
  }
  if (tensors.empty()) {
    throw StoreError("run " + std::to_string(runId) +
                     " has no stored tensors to export (it saved none, or only summaries)");
  }
  const std::map<std::string, std::string> metadata = {
      {"shardscope_run", std::to_string(runId)},
      {"shardscope_session_file", store.path().string()},
      {"shardscope_script", run.summary.scriptFile},
      {"shardscope_model", run.result.models.empty() ? "" : run.result.models[0].spec}};
  writeSafetensors(out, tensors, metadata);
  return report;
}

}  // namespace shardscope::store
