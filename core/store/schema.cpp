#include "schema.h"

#include <string>
#include <vector>

namespace shardscope::store {
namespace {

// Never edit a migration that has shipped: add a new one.
const std::vector<const char*> kMigrations = {
    // 1: sessions, runs and what a run produced.
    R"sql(
CREATE TABLE sessions(
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  created_ms INTEGER NOT NULL);
CREATE TABLE runs(
  id INTEGER PRIMARY KEY,
  session_id INTEGER NOT NULL REFERENCES sessions(id),
  title TEXT NOT NULL,
  script TEXT NOT NULL,
  script_file TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('running', 'done', 'failed', 'interrupted')),
  error TEXT NOT NULL DEFAULT '',
  started_ms INTEGER NOT NULL,
  ended_ms INTEGER,
  host TEXT NOT NULL,
  pid INTEGER NOT NULL,
  pid_start INTEGER NOT NULL,
  printed TEXT NOT NULL DEFAULT '');
CREATE TABLE models(
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  idx INTEGER NOT NULL,
  name TEXT NOT NULL,
  spec TEXT NOT NULL,
  path TEXT NOT NULL,
  config_sha256 TEXT NOT NULL,
  dtype TEXT NOT NULL,
  device TEXT NOT NULL,
  backend TEXT NOT NULL,
  tp INTEGER NOT NULL,
  engine_version TEXT NOT NULL,
  PRIMARY KEY (run_id, idx));
CREATE TABLE traces(
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  idx INTEGER NOT NULL,
  model_idx INTEGER NOT NULL,
  temperature REAL NOT NULL,
  top_k INTEGER NOT NULL,
  top_p REAL NOT NULL,
  seed INTEGER NOT NULL,
  max_tokens INTEGER NOT NULL,
  stop_token_ids BLOB NOT NULL,
  ignore_eos INTEGER NOT NULL,
  PRIMARY KEY (run_id, idx));
CREATE TABLE invokes(
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  trace_idx INTEGER NOT NULL,
  idx INTEGER NOT NULL,
  prompt_ids BLOB NOT NULL,
  token_ids BLOB NOT NULL,
  text TEXT NOT NULL,
  finish_reason TEXT NOT NULL,
  PRIMARY KEY (run_id, trace_idx, idx));
CREATE TABLE saved_values(
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  trace_idx INTEGER NOT NULL,
  idx INTEGER NOT NULL,
  name TEXT NOT NULL,
  kind TEXT NOT NULL CHECK (kind IN ('tensor', 'summary', 'repr')),
  dtype TEXT NOT NULL,
  shape TEXT NOT NULL,
  data BLOB,
  repr TEXT,
  min REAL, max REAL, mean REAL, norm REAL, non_finite INTEGER,
  note TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (run_id, trace_idx, idx));
)sql",
    // 2: replays point at the run they re-ran; runs are listed per session.
    R"sql(
ALTER TABLE runs ADD COLUMN replay_of INTEGER REFERENCES runs(id);
CREATE INDEX runs_by_session ON runs(session_id, id);
CREATE INDEX values_by_name ON saved_values(run_id, name);
)sql",
    // 3: each trace's wall time and generation steps (NULL for traces recorded before), and the
    // sampling's stop strings as a JSON list (earlier builds did not keep them: '[]').
    R"sql(
ALTER TABLE traces ADD COLUMN wall_ms REAL;
ALTER TABLE traces ADD COLUMN steps INTEGER;
ALTER TABLE traces ADD COLUMN stop TEXT NOT NULL DEFAULT '[]';
)sql",
    // 4: whether a model ran with enable_expert_parallel (NULL for models recorded before: read
    // as off, the only layout earlier builds had).
    R"sql(
ALTER TABLE models ADD COLUMN expert_parallel INTEGER;
)sql",
    // 5: the GUI view a run was made for (run_view.h: JSON; '' for a user's script). Runs the GUI
    // recorded before (script file gui.py) get the view their titles named, once, here: the
    // sweep's layers, the reads' steps and the expert ablations, which the GUI no longer reads
    // out of titles.
    R"sql(
ALTER TABLE runs ADD COLUMN view TEXT NOT NULL DEFAULT '';
UPDATE runs SET view = json_object('kind', 'sweep-layer',
    'layer', CAST(substr(title, 13, instr(title, ' target ') - 13) AS INTEGER),
    'target', CAST(substr(title, instr(title, ' target ') + 8) AS INTEGER))
  WHERE script_file = 'gui.py' AND title GLOB 'Sweep layer [0-9]* target [0-9]*';
UPDATE runs SET view = json_object('kind', 'read',
    'port', substr(title, 6, instr(title, ' [') - 6),
    'step', CAST(substr(title, instr(title, '] step ') + 7) AS INTEGER))
  WHERE script_file = 'gui.py' AND title GLOB 'Read * [[]*] step [0-9]*';
UPDATE runs SET view = json_object('kind', 'expert-ablation',
    'layer', CAST(substr(title, instr(title, ' of layer ') + 10) AS INTEGER),
    'expert', CAST(substr(title, 15, instr(title, ' of layer ') - 15) AS INTEGER))
  WHERE script_file = 'gui.py' AND title GLOB 'Ablate expert [0-9]* of layer [0-9]*';
UPDATE runs SET view = json_object('kind', 'top-k') WHERE script_file = 'gui.py' AND title = 'Top-k';
)sql",
};

}  // namespace

int schemaVersion() {
  return int(kMigrations.size());
}

int fileSchemaVersion(SqliteDatabase& db) {
  auto s = db.prepare("PRAGMA user_version");
  return s.step() ? int(s.integer(0)) : 0;
}

void migrate(SqliteDatabase& db, int toVersion) {
  SqliteTransaction t(db, SqliteTransaction::Kind::Immediate);
  const int fromVersion = fileSchemaVersion(db);
  if (fromVersion >= toVersion) return;
  for (int v = fromVersion; v < toVersion; ++v) db.exec(kMigrations[size_t(v)]);
  db.exec("PRAGMA application_id = " + std::to_string(kApplicationId));
  db.exec("PRAGMA user_version = " + std::to_string(toVersion));
  t.commit();
}

}  // namespace shardscope::store
