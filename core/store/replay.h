// Replay: re-runs a stored run's script on the same model (path, dtype, tp, device as recorded)
// and compares every saved value and every generated text with what was stored.
#pragma once

#include <string>
#include <vector>

#include "../trace/engine_connection.h"
#include "../trace/script_runner.h"
#include "session_store.h"
#include "value_diff.h"

namespace shardscope::store {

struct ValueComparison {
  int trace = 0;
  std::string name;
  bool missing = false;  // stored but not saved by the replay (or the other way round)
  ValueDiff diff;
};

struct TextComparison {
  int trace = 0, invoke = 0;
  bool same = false;  // token ids equal
  std::string before, after;
  std::vector<int64_t> beforeIds, afterIds;
  int64_t changedTokens = 0;  // positions whose ids differ, the longer one's extra tokens included
};

struct ReplayReport {
  int64_t runId = 0;
  int64_t replayId = 0;  // the replay's own run in the store (0 when not recorded)
  std::vector<ValueComparison> values;
  std::vector<TextComparison> texts;
  std::vector<std::string> notes;  // model identity changes and the like

  bool identical() const;
};

struct ReplayOptions {
  trace::RunOptions run;  // out/note/onJob/engine; model, tp, device, dtype come from the store
  bool record = true;     // add the replay to the store as a run of its own
  // When set, the replay runs on this loaded model (the caller checked that it is the recorded
  // one; here or on an engine server) and `run` is not used.
  EngineConnection* connection = nullptr;
};

// Throws StoreError when the run does not exist, and the replay's error when it fails.
ReplayReport replayRun(SessionStore& store, int64_t runId, ReplayOptions options = {});

// Compares two results (of the same script): the values and texts of `before` against `after`.
void compareResults(const trace::RunResult& before, const trace::RunResult& after,
                    ReplayReport& report);

// Compares two recorded runs of `store` (`shardscope-cli diff`, the GUI's Compare): run `a`'s
// values and texts against run `b`'s, with a note for each way their models differ. `runId` is
// `a`; `replayId` is 0. Throws StoreError when a run does not exist.
ReplayReport compareRuns(const SessionStore& store, int64_t a, int64_t b);

}  // namespace shardscope::store
