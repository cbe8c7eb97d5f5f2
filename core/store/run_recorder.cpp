#include "run_recorder.h"

namespace shardscope::store {
namespace {

// `Runner`: anything with run(script, file) and result() (ScriptRunner, EngineConnection).
template <typename Runner>
RecordedRun recorded(SessionStore& store, Runner& runner, const std::string& script,
                     const std::string& file, const std::string& title,
                     std::optional<int64_t> replayOf, int64_t* recordedId, const RunView& view) {
  RecordedRun r;
  r.id = store.beginRun(title, script, file, replayOf, view);
  if (recordedId) *recordedId = r.id;
  try {
    runner.run(script, file);
  } catch (const std::exception& e) {
    r.status = dynamic_cast<const Cancelled*>(&e) ? RunStatus::Interrupted : RunStatus::Failed;
    r.error = e.what();
    try {
      store.finishRun(r.id, runner.result(), r.status, r.error);
    } catch (const std::exception& storeError) {
      throw StoreError(std::string(e.what()) +
                       " (and recording that failure in the session log "
                       "failed too: " +
                       storeError.what() + ")");
    }
    throw;
  }
  store.finishRun(r.id, runner.result(), RunStatus::Done);
  return r;
}

}  // namespace

RecordedRun runRecorded(SessionStore& store, trace::ScriptRunner& runner, const std::string& script,
                        const std::string& file, const std::string& title,
                        std::optional<int64_t> replayOf, int64_t* recordedId, const RunView& view) {
  return recorded(store, runner, script, file, title, replayOf, recordedId, view);
}

RecordedRun runRecorded(SessionStore& store, EngineConnection& connection,
                        const std::string& script, const std::string& file,
                        const std::string& title, std::optional<int64_t> replayOf,
                        int64_t* recordedId, const RunView& view) {
  return recorded(store, connection, script, file, title, replayOf, recordedId, view);
}

}  // namespace shardscope::store
