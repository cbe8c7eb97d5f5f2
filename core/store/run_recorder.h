// Runs a trace script and records it in a session store: a `running` row first, then the result
// with its status (done; failed with the error; interrupted when cancelled).
#pragma once

#include <optional>
#include <string>

#include "../trace/engine_connection.h"
#include "../trace/script_runner.h"
#include "session_store.h"

namespace shardscope::store {

struct RecordedRun {
  int64_t id = 0;
  RunStatus status = RunStatus::Done;
  std::string error;
};

// Runs `script` and records it. A script error is recorded and then rethrown, so callers report
// it as they would without a log; the run's id is in `recordedId` when given.
RecordedRun runRecorded(SessionStore& store, trace::ScriptRunner& runner, const std::string& script,
                        const std::string& file, const std::string& title,
                        std::optional<int64_t> replayOf = {}, int64_t* recordedId = nullptr,
                        const RunView& view = {});
// The same on a loaded model, here or on an engine server (the GUI).
RecordedRun runRecorded(SessionStore& store, EngineConnection& connection,
                        const std::string& script, const std::string& file,
                        const std::string& title, std::optional<int64_t> replayOf = {},
                        int64_t* recordedId = nullptr, const RunView& view = {});

}  // namespace shardscope::store
