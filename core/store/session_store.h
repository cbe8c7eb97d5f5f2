// SessionStore: the SQLite session log. A file holds named sessions; a session holds runs; a run
// holds its script, the identity of the models it ran on, its sampling, each invoke's generation
// and every saved value. A run is written in two commits: a `running` row when it starts, and
// everything it produced together with its final status when it ends, so a crash leaves earlier
// runs intact and the unfinished one is marked `interrupted` by the next writer that opens the
// file. Corrupt, foreign and newer files are refused before anything is written to them.
//
// On disk: SQLite 3, WAL, 64 KiB pages, `PRAGMA application_id` 0x53534350 ("SSCP") and
// `PRAGMA user_version` = schema version (schema.cpp lists the migrations). Token ids are
// little-endian int64 blobs; a value is its dtype name, JSON shape and raw row-major bytes.
// Since schema 3 a trace row also holds its wall time in milliseconds, its generation steps and
// the sampling's stop strings (a JSON list of strings); since schema 4 a model row says whether it
// ran with enable_expert_parallel; since schema 5 a run row holds the GUI view it was made for
// (run_view.h).
//
// Older files: a writer migrates them when it opens them; a reader (readOnly) reads them as they
// are, without writing a byte: what an older schema did not keep reads as absent (no timing, no
// stop strings, no replay link).
//
// WAL mode: readers (another thread, the GUI, another process) never block the writer and see
// only committed runs. Each method is safe to call from any thread.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "../trace/trace_record.h"
#include "run_view.h"
#include "store_error.h"

namespace shardscope::store {

class SqliteDatabase;

struct StoreOptions {
  std::string session = "default";      // runs are added to (and listed from) this session
  int64_t valueCapBytes = 256ll << 20;  // larger saved values are kept as a summary
  bool readOnly = false;                // a reader: never writes, never migrates
  int busyTimeoutMs = 10'000;           // how long a writer waits for another writer
};

enum class RunStatus { Running, Done, Failed, Interrupted };
const char* runStatusName(RunStatus s);
// The status a runs row stores (runStatusName's words); Error names an unknown one.
RunStatus parseRunStatus(const std::string& name);

struct RunSummary {
  int64_t id = 0;
  std::string session;
  std::string title;
  std::string scriptFile;
  RunStatus status = RunStatus::Running;
  std::string error;
  int64_t startedMs = 0;  // Unix time in milliseconds
  int64_t endedMs = 0;    // 0 while running or when interrupted
  std::string model;      // spec of the first model ("" until one loaded)
  int tp = 0;
  std::string device, dtype;
  int64_t valueCount = 0;
  std::optional<int64_t> replayOf;
  int64_t traceCount = 0;
  std::optional<double> traceSeconds;  // wall time of its traces summed; absent before schema 3
  int64_t steps = 0;                   // generation steps of its traces summed
  RunView view;                        // the GUI view it was made for; none before schema 5
};

struct RunRecord {
  RunSummary summary;
  std::string script;
  std::string host;
  int64_t pid = 0;
  trace::RunResult result;  // value bytes only when asked for
};

class SessionStore {
 public:
  // Opens (or creates) `path`. Throws StoreError, leaving the file untouched, when it is not a
  // SQLite file, is damaged, belongs to another program, or was written by a newer ShardScope.
  explicit SessionStore(const std::filesystem::path& path, StoreOptions options = {});
  ~SessionStore();
  SessionStore(const SessionStore&) = delete;
  SessionStore& operator=(const SessionStore&) = delete;

  const std::filesystem::path& path() const { return path_; }
  const StoreOptions& options() const { return options_; }

  // Records a run as `running` (committed at once) and returns its id.
  int64_t beginRun(const std::string& title, const std::string& script,
                   const std::string& scriptFile, std::optional<int64_t> replayOf = {},
                   const RunView& view = {});
  // Stores what the run produced and its final status in one transaction.
  void finishRun(int64_t id, const trace::RunResult& result, RunStatus status,
                 const std::string& error = {});

  // Runs of this store's session (or of every session), oldest first.
  std::vector<RunSummary> runs(bool allSessions = false) const;
  std::vector<std::string> sessions() const;
  // One run; throws StoreError naming the runs there are when `id` is not one of them.
  RunRecord run(int64_t id, bool withValueData = true) const;
  // One saved value with its data; `traceIndex` -1 is the last trace that saved `name`.
  trace::SavedValue value(int64_t runId, const std::string& name, int traceIndex = -1) const;

  // Marks `running` runs whose writing process has ended as interrupted; returns how many.
  int markInterruptedRuns();

 private:
  void validateExisting() const;
  std::vector<RunSummary> summaries(bool allSessions, std::optional<int64_t> id) const;
  void loadResult(int64_t id, bool withValueData, trace::RunResult& out) const;

  std::filesystem::path path_;
  StoreOptions options_;
  std::unique_ptr<SqliteDatabase> db_;
  int version_ = 0;  // the file's schema version (a reader may hold an older file)
  int64_t sessionId_ = 0;
  mutable std::mutex mutex_;
};

}  // namespace shardscope::store
