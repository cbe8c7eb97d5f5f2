#include "session_store.h"

#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "schema.h"
#include "sqlite_database.h"
#include "value_summary.h"

namespace shardscope::store {
namespace {

int64_t nowMs() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

std::string hostName() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "unknown";
  return name;
}

// A process's start time in clock ticks since boot (field 22 of /proc/PID/stat), so a reused
// pid is not mistaken for the process that wrote a run; nullopt when the process is gone.
std::optional<int64_t> processStart(int64_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!in || !std::getline(in, stat)) return std::nullopt;
  const auto close = stat.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(stat.substr(close + 2));
  std::string field;
  for (int i = 3; i <= 22 && fields >> field; ++i) {
    if (i == 22) return std::stoll(field);
  }
  return std::nullopt;
}

std::string formatMB(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MB", double(bytes) / 1e6);
  return buf;
}

// Token id lists are stored as little-endian int64 blobs (the hosts we run on are little-endian).
std::string_view idsBlob(const std::vector<int64_t>& ids) {
  return {reinterpret_cast<const char*>(ids.data()), ids.size() * sizeof(int64_t)};
}

std::vector<int64_t> idsFromBlob(std::string_view b) {
  std::vector<int64_t> ids(b.size() / sizeof(int64_t));
  if (!ids.empty()) std::memcpy(ids.data(), b.data(), ids.size() * sizeof(int64_t));
  return ids;
}

std::string shapeJson(const std::vector<int64_t>& shape) {
  return nlohmann::json(shape).dump();
}

// The rows of a file are checked as they are read: readers index a value's bytes by its shape, and
// a file may have been edited or damaged by something else.
[[noreturn]] void damaged(const std::filesystem::path& path, const std::string& what) {
  throw StoreError(path.string() + " is damaged: " + what +
                   "; it was left as it is. Restore a backup or start a new session file.");
}

// A JSON list of dimensions, each >= 0, whose product times 8 (the largest element) fits in int64.
std::vector<int64_t> shapeFromJson(const std::string& s, const std::filesystem::path& path) {
  const auto j = nlohmann::json::parse(s, nullptr, /*allow_exceptions=*/false);
  std::vector<int64_t> shape;
  int64_t numel = 1;
  bool ok = j.is_array();
  for (size_t i = 0; ok && i < j.size(); ++i) {
    ok = j[i].is_number_integer() &&
         !(j[i].is_number_unsigned() && j[i].get<uint64_t>() > INT64_MAX) &&
         j[i].get<int64_t>() >= 0 && !__builtin_mul_overflow(numel, j[i].get<int64_t>(), &numel);
    if (ok) shape.push_back(j[i].get<int64_t>());
  }
  if (!ok || numel > INT64_MAX / 8) damaged(path, "a saved value's shape is '" + s + "'");
  return shape;
}

// A trace's stop strings: a JSON list of strings.
std::vector<std::string> stopsFromJson(const std::string& s, const std::filesystem::path& path) {
  const auto j = nlohmann::json::parse(s, nullptr, /*allow_exceptions=*/false);
  std::vector<std::string> stops;
  bool ok = j.is_array();
  for (size_t i = 0; ok && i < j.size(); ++i) {
    ok = j[i].is_string();
    if (ok) stops.push_back(j[i].get<std::string>());
  }
  if (!ok) damaged(path, "a trace's stop strings are '" + s + "'");
  return stops;
}

// Runs' traces are numbered 0, 1, ...: a row that names another trace is damage.
trace::TraceRecord& traceAt(trace::RunResult& r, int64_t index, const std::filesystem::path& path) {
  if (index < 0 || index >= int64_t(r.traces.size()))
    damaged(path, "a row refers to trace " + std::to_string(index) + " of a run with " +
                      std::to_string(r.traces.size()));
  return r.traces[size_t(index)];
}

bool hasSqliteHeader(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  char header[16] = {};
  in.read(header, sizeof header);
  return in.gcount() == sizeof header && std::memcmp(header, "SQLite format 3", 16) == 0;
}

}  // namespace

const char* runStatusName(RunStatus s) {
  switch (s) {
    case RunStatus::Running:
      return "running";
    case RunStatus::Done:
      return "done";
    case RunStatus::Failed:
      return "failed";
    case RunStatus::Interrupted:
      return "interrupted";
  }
  return "?";
}

RunStatus parseRunStatus(const std::string& name) {
  for (RunStatus s :
       {RunStatus::Running, RunStatus::Done, RunStatus::Failed, RunStatus::Interrupted}) {
    if (name == runStatusName(s)) return s;
  }
  throw Error("a run's status '" + name +
              "' is none of running, done, failed, interrupted: the session file was written by "
              "another program or a newer ShardScope");
}

SessionStore::SessionStore(const std::filesystem::path& path, StoreOptions options)
    : path_(path), options_(std::move(options)) {
  if (options_.valueCapBytes < 0 || options_.valueCapBytes > 900'000'000) {
    throw StoreError(
        "the value cap must be between 0 and 900 MB (SQLite keeps a value below 1 GB), "
        "got " +
        formatMB(options_.valueCapBytes));
  }
  validateExisting();
  if (options_.readOnly) {
    if (!std::filesystem::exists(path_)) throw StoreError("no session file at " + path_.string());
    db_ = std::make_unique<SqliteDatabase>(path_, SqliteDatabase::Mode::ReadOnly,
                                           options_.busyTimeoutMs);
    version_ = fileSchemaVersion(*db_);
    if (version_ < 1) {
      throw StoreError(path_.string() +
                       " holds no session yet; record a run in it first (shardscope-cli run "
                       "--log, or the GUI)");
    }
    auto s = db_->prepare("SELECT id FROM sessions WHERE name = ?");
    s.bind(1, options_.session);
    sessionId_ = s.step() ? s.integer(0) : -1;
    return;
  }
  db_ = std::make_unique<SqliteDatabase>(path_, SqliteDatabase::Mode::ReadWriteCreate,
                                         options_.busyTimeoutMs);
  // 64 KiB pages (only takes effect on a new file, before WAL): saved values are large blobs,
  // and fewer overflow pages make writing them several times faster.
  db_->exec("PRAGMA page_size = 65536");
  db_->exec("PRAGMA journal_mode = WAL");
  // WAL with synchronous=NORMAL: a committed run survives a crash of the process; a power loss
  // may roll back the last commits but never damages the file.
  db_->exec("PRAGMA synchronous = NORMAL");
  db_->exec("PRAGMA foreign_keys = ON");
  migrate(*db_);
  version_ = fileSchemaVersion(*db_);
  {
    SqliteTransaction t(*db_, SqliteTransaction::Kind::Immediate);
    auto find = db_->prepare("SELECT id FROM sessions WHERE name = ?");
    find.bind(1, options_.session);
    if (find.step()) {
      sessionId_ = find.integer(0);
    } else {
      auto add = db_->prepare("INSERT INTO sessions(name, created_ms) VALUES (?, ?)");
      add.bind(1, options_.session).bind(2, nowMs()).run();
      sessionId_ = db_->lastInsertId();
    }
    t.commit();
  }
  markInterruptedRuns();
}

SessionStore::~SessionStore() = default;

// Looks at an existing file through a read-only connection first, so a file we refuse is never
// written to (not even by a journal-mode change).
void SessionStore::validateExisting() const {
  std::error_code ec;
  if (!std::filesystem::exists(path_, ec) || std::filesystem::file_size(path_, ec) == 0) return;
  const std::string file = path_.string();
  if (!hasSqliteHeader(path_)) {
    throw StoreError(file +
                     " is not a ShardScope session file (it is not a SQLite database); it was "
                     "left as it is. Pass a new file name to start a session.");
  }
  try {
    SqliteDatabase db(path_, SqliteDatabase::Mode::ReadOnly, options_.busyTimeoutMs);
    auto idQuery = db.prepare("PRAGMA application_id");
    const int64_t appId = idQuery.step() ? idQuery.integer(0) : 0;
    const int version = fileSchemaVersion(db);
    auto tables = db.prepare("SELECT count(*) FROM sqlite_master");
    const int64_t objects = tables.step() ? tables.integer(0) : 0;
    if (appId != kApplicationId && !(appId == 0 && version == 0 && objects == 0)) {
      throw StoreError(file + " is a SQLite database of another program (application id " +
                       std::to_string(appId) + ", " + std::to_string(objects) +
                       " schema objects), not a ShardScope session; it was left as it is. Pass "
                       "a new file name to start a session.");
    }
    if (version < 0) throw StoreError("schema version " + std::to_string(version));
    if (version > schemaVersion()) {
      throw StoreError(file + " was written by a newer ShardScope (session schema " +
                       std::to_string(version) + "; this build reads up to " +
                       std::to_string(schemaVersion()) +
                       "); it was left as it is. Open it with that version or newer.");
    }
    auto check = db.prepare("PRAGMA quick_check");
    const std::string verdict = check.step() ? check.text(0) : "no answer";
    if (verdict != "ok") throw StoreError("integrity check: " + verdict);
  } catch (const StoreError& e) {
    const std::string what = e.what();
    if (what.rfind(file + " is ", 0) == 0 || what.rfind(file + " was ", 0) == 0) throw;
    throw StoreError(file + " is damaged and cannot be opened as a session (" + what +
                     "); it was left as it is. Restore a backup or start a new session file.");
  }
}

int64_t SessionStore::beginRun(const std::string& title, const std::string& script,
                               const std::string& scriptFile, std::optional<int64_t> replayOf,
                               const RunView& view) {
  std::lock_guard lock(mutex_);
  if (options_.readOnly) throw StoreError(path_.string() + " was opened read-only");
  auto s = db_->prepare(
      "INSERT INTO runs(session_id, title, script, script_file, status, started_ms, host, pid, "
      "pid_start, replay_of, view) VALUES (?, ?, ?, ?, 'running', ?, ?, ?, ?, ?, ?)");
  s.bind(1, sessionId_).bind(2, title).bind(3, script).bind(4, scriptFile).bind(5, nowMs());
  s.bind(6, hostName()).bind(7, int64_t(getpid())).bind(8, processStart(getpid()).value_or(0));
  if (replayOf)
    s.bind(9, *replayOf);
  else
    s.bindNull(9);
  s.bind(10, runViewJson(view));
  s.run();
  return db_->lastInsertId();
}

void SessionStore::finishRun(int64_t id, const trace::RunResult& result, RunStatus status,
                             const std::string& error) {
  std::lock_guard lock(mutex_);
  if (options_.readOnly) throw StoreError(path_.string() + " was opened read-only");
  SqliteTransaction t(*db_, SqliteTransaction::Kind::Immediate);
  {
    auto current = db_->prepare("SELECT status FROM runs WHERE id = ?");
    current.bind(1, id);
    if (!current.step())
      throw StoreError("run " + std::to_string(id) + " is not in " + path_.string());
    if (current.text(0) != "running")
      throw StoreError("run " + std::to_string(id) + " has already ended (" + current.text(0) +
                       ")");
  }
  auto model = db_->prepare("INSERT INTO models VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  for (size_t i = 0; i < result.models.size(); ++i) {
    const trace::ModelIdentity& m = result.models[i];
    model.bind(1, id).bind(2, int64_t(i)).bind(3, m.name).bind(4, m.spec).bind(5, m.path);
    model.bind(6, m.configSha256).bind(7, m.dtype).bind(8, m.device).bind(9, m.backend);
    model.bind(10, int64_t(m.tp)).bind(11, m.engineVersion).bind(12, int64_t(m.expertParallel));
    model.run();
    model.reset();
  }
  auto trace = db_->prepare(
      "INSERT INTO traces(run_id, idx, model_idx, temperature, top_k, top_p, seed, max_tokens, "
      "stop_token_ids, ignore_eos, wall_ms, steps, stop) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
      "?, ?)");
  auto invoke = db_->prepare("INSERT INTO invokes VALUES (?, ?, ?, ?, ?, ?, ?)");
  auto value = db_->prepare(
      "INSERT INTO saved_values(run_id, trace_idx, idx, name, kind, dtype, shape, data, repr, "
      "min, max, mean, norm, non_finite, note) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
      "?)");
  for (size_t ti = 0; ti < result.traces.size(); ++ti) {
    const trace::TraceRecord& tr = result.traces[ti];
    const SamplingParams& sp = tr.sampling;
    const std::string_view stops = idsBlob(sp.stopTokenIds);
    trace.bind(1, id).bind(2, int64_t(ti)).bind(3, int64_t(tr.modelIndex)).bind(4, sp.temperature);
    trace.bind(5, sp.topK).bind(6, sp.topP).bind(7, int64_t(sp.seed)).bind(8, sp.maxTokens);
    trace.bindBlob(9, stops.data(), stops.size()).bind(10, int64_t(sp.ignoreEos));
    if (tr.timing) {
      trace.bind(11, tr.timing->wallSeconds * 1000.0).bind(12, tr.timing->steps);
    } else {
      trace.bindNull(11).bindNull(12);
    }
    // Stop strings come from script text; a byte that is not UTF-8 is kept as U+FFFD rather
    // than failing the recording.
    trace.bind(
        13, nlohmann::json(sp.stop).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    trace.run();
    trace.reset();
    for (size_t ii = 0; ii < tr.invokes.size(); ++ii) {
      const trace::InvokeRecord& inv = tr.invokes[ii];
      const std::string_view prompt = idsBlob(inv.promptIds), tokens = idsBlob(inv.tokenIds);
      invoke.bind(1, id).bind(2, int64_t(ti)).bind(3, int64_t(ii));
      invoke.bindBlob(4, prompt.data(), prompt.size()).bindBlob(5, tokens.data(), tokens.size());
      invoke.bind(6, inv.text).bind(7, inv.finishReason);
      invoke.run();
      invoke.reset();
    }
    for (size_t vi = 0; vi < tr.values.size(); ++vi) {
      const trace::SavedValue& v = tr.values[vi];
      const int64_t bytes = int64_t(v.tensor.bytes.size());
      const bool tooLarge = v.hasData() && bytes > options_.valueCapBytes;
      const std::optional<trace::ValueSummary> summary =
          tooLarge ? std::optional(summarize(v.tensor)) : v.summary;
      std::string note = v.note;
      if (tooLarge) {
        note = "stored as a summary: " + formatMB(bytes) + " is over the session's value cap of " +
               formatMB(options_.valueCapBytes);
      }
      value.bind(1, id).bind(2, int64_t(ti)).bind(3, int64_t(vi)).bind(4, v.name);
      value.bind(5, std::string(!v.isTensor() ? "repr" : summary ? "summary" : "tensor"));
      value.bind(6, std::string(v.isTensor() ? dtypeName(v.tensor.dtype) : ""));
      value.bind(7, shapeJson(v.tensor.shape));
      if (v.isTensor() && !summary)
        value.bindBlob(8, v.tensor.bytes.data(), v.tensor.bytes.size());
      else
        value.bindNull(8);
      if (v.repr)
        value.bind(9, *v.repr);
      else
        value.bindNull(9);
      if (summary) {
        value.bind(10, summary->min).bind(11, summary->max).bind(12, summary->mean);
        value.bind(13, summary->norm).bind(14, summary->nonFinite);
      } else {
        for (int c = 10; c <= 14; ++c) value.bindNull(c);
      }
      value.bind(15, note);
      value.run();
      value.reset();
    }
  }
  auto end =
      db_->prepare("UPDATE runs SET status = ?, error = ?, ended_ms = ?, printed = ? WHERE id = ?");
  end.bind(1, std::string(runStatusName(status))).bind(2, error).bind(3, nowMs());
  end.bind(4, result.printed).bind(5, id).run();
  t.commit();
}

std::vector<std::string> SessionStore::sessions() const {
  std::lock_guard lock(mutex_);
  std::vector<std::string> out;
  auto s = db_->prepare("SELECT name FROM sessions ORDER BY id");
  while (s.step()) out.push_back(s.text(0));
  return out;
}

std::vector<RunSummary> SessionStore::runs(bool allSessions) const {
  std::lock_guard lock(mutex_);
  return summaries(allSessions, std::nullopt);
}

// Called with mutex_ held: the runs of this session (or all), or the one run `id`.
std::vector<RunSummary> SessionStore::summaries(bool allSessions, std::optional<int64_t> id) const {
  // A reader of an older file selects NULL for what its schema did not keep.
  const bool timed = version_ >= 3;
  const auto perTrace = [](const std::string& what) {
    return "(SELECT " + what + " FROM traces t WHERE t.run_id = r.id)";
  };
  auto s = db_->prepare(
      "SELECT r.id, s.name, r.title, r.script_file, r.status, r.error, r.started_ms, "
      "r.ended_ms, m.spec, m.tp, m.device, m.dtype, "
      "(SELECT count(*) FROM saved_values v WHERE v.run_id = r.id), " +
      std::string(version_ >= 2 ? "r.replay_of" : "NULL") + ", " + perTrace("count(*)") + ", " +
      (timed ? perTrace("sum(t.wall_ms)") : "NULL") + ", " +
      (timed ? perTrace("sum(t.steps)") : "NULL") + ", " +
      std::string(version_ >= 5 ? "r.view" : "''") + " " +
      "FROM runs r JOIN sessions s ON s.id = r.session_id "
      "LEFT JOIN models m ON m.run_id = r.id AND m.idx = 0 "
      "WHERE (? OR r.session_id = ?) AND (? OR r.id = ?) ORDER BY r.id");
  s.bind(1, int64_t(allSessions)).bind(2, sessionId_);
  s.bind(3, int64_t(!id.has_value())).bind(4, id.value_or(0));
  std::vector<RunSummary> out;
  while (s.step()) {
    RunSummary r;
    r.id = s.integer(0);
    r.session = s.text(1);
    r.title = s.text(2);
    r.scriptFile = s.text(3);
    r.status = parseRunStatus(s.text(4));
    r.error = s.text(5);
    r.startedMs = s.integer(6);
    r.endedMs = s.isNull(7) ? 0 : s.integer(7);
    r.model = s.text(8);
    r.tp = int(s.integer(9));
    r.device = s.text(10);
    r.dtype = s.text(11);
    r.valueCount = s.integer(12);
    if (!s.isNull(13)) r.replayOf = s.integer(13);
    r.traceCount = s.integer(14);
    if (!s.isNull(15)) r.traceSeconds = s.real(15) / 1000.0;
    r.steps = s.isNull(16) ? 0 : s.integer(16);
    try {
      r.view = parseRunView(s.text(17));
    } catch (const StoreError& e) {
      throw StoreError(path_.string() + " is damaged: run " + std::to_string(r.id) + ": " +
                       e.what());
    }
    out.push_back(std::move(r));
  }
  return out;
}

RunRecord SessionStore::run(int64_t id, bool withValueData) const {
  std::lock_guard lock(mutex_);
  SqliteTransaction snapshot(*db_, SqliteTransaction::Kind::Deferred);  // one consistent view
  std::vector<RunSummary> found = summaries(/*allSessions=*/true, id);
  if (found.empty()) {
    std::string ids;
    auto all = db_->prepare("SELECT id FROM runs ORDER BY id");
    while (all.step()) ids += (ids.empty() ? "" : ", ") + std::to_string(all.integer(0));
    throw StoreError("run " + std::to_string(id) + " is not in " + path_.string() +
                     (ids.empty() ? " (it has no runs yet)" : " (runs there: " + ids + ")"));
  }
  RunRecord r;
  r.summary = std::move(found[0]);
  auto s = db_->prepare("SELECT script, host, pid, printed FROM runs WHERE id = ?");
  s.bind(1, id);
  if (s.step()) {
    r.script = s.text(0);
    r.host = s.text(1);
    r.pid = s.integer(2);
    r.result.printed = s.text(3);
  }
  loadResult(id, withValueData, r.result);
  return r;
}

void SessionStore::loadResult(int64_t id, bool withValueData, trace::RunResult& out) const {
  auto m = db_->prepare("SELECT * FROM models WHERE run_id = ? ORDER BY idx");
  m.bind(1, id);
  while (m.step()) {
    trace::ModelIdentity mi;
    mi.name = m.text(2);
    mi.spec = m.text(3);
    mi.path = m.text(4);
    mi.configSha256 = m.text(5);
    mi.dtype = m.text(6);
    mi.device = m.text(7);
    mi.backend = m.text(8);
    mi.tp = int(m.integer(9));
    mi.engineVersion = m.text(10);
    mi.expertParallel = version_ >= 4 && !m.isNull(11) && m.integer(11) != 0;
    out.models.push_back(std::move(mi));
  }
  auto t = db_->prepare(
      "SELECT model_idx, temperature, top_k, top_p, seed, max_tokens, stop_token_ids, "
      "ignore_eos, " +
      std::string(version_ >= 3 ? "wall_ms, steps, stop" : "NULL, NULL, '[]'") +
      " FROM traces WHERE run_id = ? ORDER BY idx");
  t.bind(1, id);
  while (t.step()) {
    trace::TraceRecord tr;
    tr.modelIndex = int(t.integer(0));
    tr.sampling.temperature = t.real(1);
    tr.sampling.topK = t.integer(2);
    tr.sampling.topP = t.real(3);
    tr.sampling.seed = uint64_t(t.integer(4));
    tr.sampling.maxTokens = t.integer(5);
    tr.sampling.stopTokenIds = idsFromBlob(t.blob(6));
    tr.sampling.ignoreEos = t.integer(7) != 0;
    if (!t.isNull(8)) tr.timing = trace::TraceTiming{t.real(8) / 1000.0, t.integer(9)};
    tr.sampling.stop = stopsFromJson(t.text(10), path_);
    out.traces.push_back(std::move(tr));
  }
  auto inv = db_->prepare(
      "SELECT trace_idx, prompt_ids, token_ids, text, finish_reason FROM invokes WHERE run_id = ? "
      "ORDER BY trace_idx, idx");
  inv.bind(1, id);
  while (inv.step()) {
    trace::InvokeRecord r;
    r.promptIds = idsFromBlob(inv.blob(1));
    r.tokenIds = idsFromBlob(inv.blob(2));
    r.text = inv.text(3);
    r.finishReason = inv.text(4);
    traceAt(out, inv.integer(0), path_).invokes.push_back(std::move(r));
  }
  const std::string data = withValueData ? "data" : "NULL";
  auto v = db_->prepare("SELECT trace_idx, name, kind, dtype, shape, " + data +
                        ", repr, min, max, mean, norm, non_finite, note FROM saved_values "
                        "WHERE run_id = ? ORDER BY trace_idx, idx");
  v.bind(1, id);
  while (v.step()) {
    trace::SavedValue sv;
    sv.name = v.text(1);
    const std::string kind = v.text(2);
    if (kind == "repr") {
      sv.repr = v.text(6);
    } else {
      try {
        sv.tensor.dtype = dtypeFromName(v.text(3));
      } catch (const Error&) {
        damaged(path_, "saved value '" + sv.name + "' has dtype '" + v.text(3) + "'");
      }
      sv.tensor.shape = shapeFromJson(v.text(4), path_);
      sv.tensor.bytes = v.bytes(5);
      const size_t expected = size_t(sv.tensor.numel()) * dtypeSize(sv.tensor.dtype);
      const bool stored = kind == "tensor" && withValueData;
      if (stored ? sv.tensor.bytes.size() != expected : !sv.tensor.bytes.empty()) {
        damaged(path_, "saved value '" + sv.name + "' holds " +
                           std::to_string(sv.tensor.bytes.size()) + " bytes for shape " +
                           sv.tensor.shapeString() + " of " + dtypeName(sv.tensor.dtype));
      }
    }
    if (kind == "summary") {
      sv.summary = trace::ValueSummary{v.real(7), v.real(8), v.real(9), v.real(10), v.integer(11)};
    }
    sv.note = v.text(12);
    traceAt(out, v.integer(0), path_).values.push_back(std::move(sv));
  }
}

trace::SavedValue SessionStore::value(int64_t runId, const std::string& name,
                                      int traceIndex) const {
  const RunRecord r = run(runId, /*withValueData=*/false);
  std::string names;
  for (int ti = int(r.result.traces.size()) - 1; ti >= 0; --ti) {
    if (traceIndex >= 0 && ti != traceIndex) continue;
    for (const auto& v : r.result.traces[size_t(ti)].values) {
      if (v.name != name) continue;
      std::lock_guard lock(mutex_);
      auto s = db_->prepare(
          "SELECT data FROM saved_values WHERE run_id = ? AND trace_idx = ? AND name = ? "
          "ORDER BY idx");
      s.bind(1, runId).bind(2, int64_t(ti)).bind(3, name);
      trace::SavedValue out = v;
      if (out.hasData()) {
        // The row was found by a scan of the run's values; a damaged index can hide it here.
        if (!s.step()) damaged(path_, "saved value '" + name + "' cannot be read back");
        out.tensor.bytes = s.bytes(0);
        if (out.tensor.bytes.size() != size_t(out.tensor.numel()) * dtypeSize(out.tensor.dtype))
          damaged(path_, "saved value '" + name + "' holds " +
                             std::to_string(out.tensor.bytes.size()) + " bytes for shape " +
                             out.tensor.shapeString() + " of " + dtypeName(out.tensor.dtype));
      }
      return out;
    }
  }
  for (const auto& t : r.result.traces) {
    for (const auto& v : t.values) names += (names.empty() ? "" : ", ") + v.name;
  }
  throw StoreError("run " + std::to_string(runId) + " saved no value named '" + name + "'" +
                   (traceIndex >= 0 ? " in trace " + std::to_string(traceIndex) : "") +
                   (names.empty() ? " (it saved none)" : "; it saved: " + names));
}

int SessionStore::markInterruptedRuns() {
  std::lock_guard lock(mutex_);
  if (options_.readOnly) return 0;
  SqliteTransaction t(*db_, SqliteTransaction::Kind::Immediate);
  auto s = db_->prepare("SELECT id, host, pid, pid_start FROM runs WHERE status = 'running'");
  auto mark = db_->prepare(
      "UPDATE runs SET status = 'interrupted', error = ? WHERE id = ? AND status = 'running'");
  const std::string host = hostName();
  int marked = 0;
  while (s.step()) {
    if (s.text(1) != host) continue;  // another machine's process: we cannot tell
    const int64_t pid = s.integer(2);
    if (processStart(pid) == std::optional<int64_t>(s.integer(3))) continue;  // still writing
    mark.bind(1, "the process that ran it (pid " + std::to_string(pid) +
                     ") ended before the run finished");
    mark.bind(2, s.integer(0)).run();
    mark.reset();
    ++marked;
  }
  t.commit();
  return marked;
}

}  // namespace shardscope::store
