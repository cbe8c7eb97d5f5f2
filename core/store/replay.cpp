#include "replay.h"

#include <algorithm>
#include <filesystem>

#include "../file_tree.h"
#include "../sha256.h"
#include "run_recorder.h"

namespace shardscope::store {

namespace {

int64_t changedTokens(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  const size_t common = std::min(a.size(), b.size());
  int64_t changed = int64_t(std::max(a.size(), b.size()) - common);
  for (size_t i = 0; i < common; ++i) changed += a[i] != b[i];
  return changed;
}

std::string modelText(const trace::ModelIdentity& m) {
  return m.spec + " (" + m.dtype + ", tp=" + std::to_string(m.tp) +
         (m.expertParallel ? ", expert parallel" : "") + ", " + m.device + ")";
}

// The recorded run's process group as this replay's rank threads can have it. Rank processes
// (mpi, nccl+mpi) are how the replaying program was started, not an option: they replay as auto.
std::optional<GroupBackend> replayedBackend(const std::string& recorded) {
  if (recorded == "local") return GroupBackend::Local;
  if (recorded == "nccl") return GroupBackend::Nccl;
  return std::nullopt;
}

}  // namespace

bool ReplayReport::identical() const {
  for (const auto& v : values) {
    if (v.missing || !v.diff.identical) return false;
  }
  for (const auto& t : texts) {
    if (!t.same) return false;
  }
  return true;
}

void compareResults(const trace::RunResult& before, const trace::RunResult& after,
                    ReplayReport& report) {
  if (before.traces.size() != after.traces.size()) {
    report.notes.push_back("the run had " + std::to_string(before.traces.size()) +
                           " traces, the replay " + std::to_string(after.traces.size()));
  }
  for (size_t ti = 0; ti < before.traces.size(); ++ti) {
    const trace::TraceRecord& a = before.traces[ti];
    const trace::TraceRecord* b = ti < after.traces.size() ? &after.traces[ti] : nullptr;
    for (const trace::SavedValue& v : a.values) {
      ValueComparison c;
      c.trace = int(ti);
      c.name = v.name;
      const trace::SavedValue* now = nullptr;
      if (b) {
        for (const auto& w : b->values) now = w.name == v.name ? &w : now;
      }
      if (!now) {
        c.missing = true;
        c.diff.detail = "not saved by the replay";
      } else {
        c.diff = compareValues(v, *now);
      }
      report.values.push_back(std::move(c));
    }
    if (b) {
      for (const auto& w : b->values) {
        bool known = false;
        for (const auto& v : a.values) known |= v.name == w.name;
        if (!known) {
          ValueComparison c;
          c.trace = int(ti);
          c.name = w.name;
          c.missing = true;
          c.diff.detail = "saved by the replay only";
          report.values.push_back(std::move(c));
        }
      }
    }
    for (size_t ii = 0; ii < a.invokes.size(); ++ii) {
      TextComparison t;
      t.trace = int(ti);
      t.invoke = int(ii);
      t.before = a.invokes[ii].text;
      t.beforeIds = a.invokes[ii].tokenIds;
      if (b && ii < b->invokes.size()) {
        t.after = b->invokes[ii].text;
        t.afterIds = b->invokes[ii].tokenIds;
        t.same = t.beforeIds == t.afterIds;
      }
      t.changedTokens = changedTokens(t.beforeIds, t.afterIds);
      report.texts.push_back(std::move(t));
    }
  }
}

ReplayReport replayRun(SessionStore& store, int64_t runId, ReplayOptions options) {
  const RunRecord original = store.run(runId);
  ReplayReport report;
  report.runId = runId;
  trace::RunOptions& o = options.run;
  for (const trace::ModelIdentity& m : original.result.models) {
    // The recorded directory when it is still there (the spec may have been relative).
    const bool dirThere = !m.path.empty() && std::filesystem::exists(m.path);
    o.modelDirs[m.name] = dirThere ? m.path : m.spec;
    if (dirThere) {
      const std::string now = sha256Hex(readFile(std::filesystem::path(m.path) / "config.json"));
      if (now != m.configSha256)
        report.notes.push_back(m.path + "/config.json changed since the run was recorded");
    }
  }
  if (!original.result.models.empty()) {
    const trace::ModelIdentity& m = original.result.models[0];
    o.tp = m.tp;
    o.device = parseDeviceKind(m.device);
    o.dtype = parseModelDtype(m.dtype);
    o.backend = replayedBackend(m.backend);
    o.expertParallel = m.expertParallel;
    if (m.engineVersion != SHARDSCOPE_VERSION) {
      report.notes.push_back("recorded with ShardScope " + m.engineVersion + ", replayed with " +
                             SHARDSCOPE_VERSION);
    }
  }
  const std::string title =
      "replay of run " + std::to_string(runId) + ": " + original.summary.title;
  const auto replay = [&](auto& runner) {
    if (options.record) {
      report.replayId = runRecorded(store, runner, original.script, original.summary.scriptFile,
                                    title, runId, nullptr, original.summary.view)
                            .id;
    } else {
      runner.run(original.script, original.summary.scriptFile);
    }
    compareResults(original.result, runner.result(), report);
  };
  if (options.connection) {
    replay(*options.connection);
  } else {
    trace::ScriptRunner runner(o);
    replay(runner);
  }
  return report;
}

ReplayReport compareRuns(const SessionStore& store, int64_t a, int64_t b) {
  const RunRecord before = store.run(a);
  const RunRecord after = store.run(b);
  ReplayReport report;
  report.runId = a;
  const size_t models = std::max(before.result.models.size(), after.result.models.size());
  for (size_t i = 0; i < models; ++i) {
    const auto* x = i < before.result.models.size() ? &before.result.models[i] : nullptr;
    const auto* y = i < after.result.models.size() ? &after.result.models[i] : nullptr;
    const std::string was = x ? modelText(*x) : "no model", now = y ? modelText(*y) : "no model";
    if (was != now || (x && y && x->configSha256 != y->configSha256)) {
      report.notes.push_back("model " + std::to_string(i) + ": run " + std::to_string(a) + " on " +
                             was + ", run " + std::to_string(b) + " on " + now +
                             (was == now ? " with another config.json" : ""));
    }
  }
  if (before.script != after.script) report.notes.push_back("the two runs' scripts differ");
  compareResults(before.result, after.result, report);
  return report;
}

}  // namespace shardscope::store
