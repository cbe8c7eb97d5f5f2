// The session log's schema migrations: a writer upgrades an older file (its runs read back, new
// runs keep what the new schema adds); a reader reads an older file without writing a byte; GUI
// runs recorded before schema 5 get the views their titles named.
#include <QtTest>
#include <filesystem>
#include <string>

#include "common/test_support.h"
#include "core/file_tree.h"
#include "core/sha256.h"
#include "core/store/schema.h"
#include "core/store/session_store.h"
#include "core/store/sqlite_database.h"

using namespace shardscope;
using namespace shardscope::store;

namespace {

std::string fileSha(const std::filesystem::path& p) {
  return sha256Hex(readFile(p));
}

QString q(const std::string& s) {
  return QString::fromStdString(s);
}

}  // namespace

class TestSchemaMigrations : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void migratesAnOlderFile() {
    test::TempDir dir;
    const auto path = dir.path() / "old.db";
    {
      SqliteDatabase db(path, SqliteDatabase::Mode::ReadWriteCreate, 1000);
      migrate(db, 1);
      db.exec("INSERT INTO sessions VALUES (1, 'default', 0)");
      db.exec(
          "INSERT INTO runs(id, session_id, title, script, script_file, status, started_ms, host, "
          "pid, pid_start) VALUES (1, 1, 'old run', 'x = 1', 'old.py', 'done', 5, 'h', 1, 1)");
      QCOMPARE(fileSchemaVersion(db), 1);
    }
    {
      SessionStore s(path);
      const RunRecord r = s.run(1);
      QCOMPARE(q(r.summary.title), QString("old run"));
      QVERIFY(!r.summary.replayOf);
      QVERIFY(r.summary.view.kind == RunView::Kind::None);  // schema 5 added views
      const int64_t id = s.beginRun("new", "", "new.py", 1);
      s.finishRun(id, {}, RunStatus::Done);
    }
    SqliteDatabase db(path, SqliteDatabase::Mode::ReadOnly, 1000);
    QCOMPARE(fileSchemaVersion(db), schemaVersion());
    QVERIFY(schemaVersion() >= 2);
  }

  // GUI runs of a file before schema 5 get, once, the views their titles named (the GUI no longer
  // reads titles); a user's script of the same title, and other GUI runs, get none.
  void migrationGivesOlderGuiRunsTheirViews() {
    test::TempDir dir;
    const auto path = dir.path() / "v4.db";
    {
      SqliteDatabase db(path, SqliteDatabase::Mode::ReadWriteCreate, 1000);
      migrate(db, 4);
      db.exec("INSERT INTO sessions VALUES (1, 'default', 0)");
      const char* runs[][2] = {
          {"Sweep layer 2 target 151643", "gui.py"},
          {"Read model.model.layers[1].self_attn.o_proj.input [head] step 3", "gui.py"},
          {"Ablate expert 7 of layer 1", "gui.py"},
          {"Top-k", "gui.py"},
          {"Logit lens", "gui.py"},
          {"Top-k", "mine.py"}};
      for (const auto& [title, file] : runs) {
        db.exec(std::string("INSERT INTO runs(session_id, title, script, script_file, status, "
                            "started_ms, host, pid, pid_start) VALUES (1, '") +
                title + "', '', '" + file + "', 'done', 5, 'h', 1, 1)");
      }
    }
    SessionStore s(path);
    const auto runs = s.runs();
    QCOMPARE(runs.size(), size_t(6));
    QVERIFY(runs[0].view == RunView::sweepLayer(2, 151643));
    QVERIFY(runs[1].view == RunView::read("model.model.layers[1].self_attn.o_proj.input", 3));
    QVERIFY(runs[2].view == RunView::expertAblation(1, 7));
    QVERIFY(runs[3].view == RunView::of(RunView::Kind::TopK));
    QVERIFY(runs[4].view == RunView{});
    QVERIFY(runs[5].view == RunView{});
  }

  // A file of schema 2 (before trace timing and stop strings): a reader reads it without writing a
  // byte; a writer migrates it, the old run reads back without timing, and new runs keep theirs.
  void readsASchema2FileUntouchedThenMigratesIt() {
    test::TempDir dir;
    const auto path = dir.path() / "v2.db";
    {
      SqliteDatabase db(path, SqliteDatabase::Mode::ReadWriteCreate, 1000);
      migrate(db, 2);
      db.exec("INSERT INTO sessions VALUES (1, 'default', 0)");
      db.exec(
          "INSERT INTO runs(id, session_id, title, script, script_file, status, started_ms, "
          "ended_ms, host, pid, pid_start, replay_of) VALUES (1, 1, 'v2 run', 'x = 1', 'v2.py', "
          "'done', 5, 9, 'h', 1, 1, NULL)");
      db.exec("INSERT INTO traces VALUES (1, 0, 0, 0.5, 3, 0.8, 7, 6, x'', 1)");
      db.exec(
          "INSERT INTO models VALUES (1, 0, 'm', 'demo', '/d', 'sha', 'float32', 'cpu', "
          "'local', 2, '0.1.0')");
      QCOMPARE(fileSchemaVersion(db), 2);
    }
    const std::string before = fileSha(path);
    {
      SessionStore reader(path, {.readOnly = true});
      const auto runs = reader.runs();
      QCOMPARE(runs.size(), size_t(1));
      QCOMPARE(runs[0].traceCount, int64_t(1));
      QVERIFY(!runs[0].traceSeconds);
      const RunRecord r = reader.run(1);
      QCOMPARE(r.result.traces.size(), size_t(1));
      QVERIFY(!r.result.traces[0].timing);
      QVERIFY(r.result.traces[0].sampling.stop.empty());
      QCOMPARE(r.result.traces[0].sampling.maxTokens, int64_t(6));
      QCOMPARE(r.result.traces[0].sampling.topP, 0.8);
      QCOMPARE(r.result.models.size(), size_t(1));
      QCOMPARE(r.result.models[0].tp, 2);
      QVERIFY(!r.result.models[0].expertParallel);  // schema 4 added it; older runs had none
    }
    QCOMPARE(q(fileSha(path)), q(before));
    QVERIFY(!std::filesystem::exists(path.string() + "-wal"));
    {
      SessionStore s(path);
      QVERIFY(!s.run(1).result.traces.at(0).timing);
      QVERIFY(!s.run(1).result.models.at(0).expertParallel);
      trace::RunResult timed;
      timed.traces.resize(1);
      timed.traces[0].timing = trace::TraceTiming{0.25, 4};
      timed.traces[0].sampling.stop = {"\n\n", "The"};
      const int64_t id = s.beginRun("v3 run", "", "v3.py");
      s.finishRun(id, timed, RunStatus::Done);
    }
    SqliteDatabase db(path, SqliteDatabase::Mode::ReadOnly, 1000);
    QCOMPARE(fileSchemaVersion(db), schemaVersion());
    SessionStore reader(path, {.readOnly = true});
    const auto runs = reader.runs();
    QCOMPARE(runs.size(), size_t(2));
    QVERIFY(!runs[0].traceSeconds);
    QCOMPARE(runs[1].traceSeconds.value_or(-1), 0.25);
    QCOMPARE(runs[1].steps, int64_t(4));
    const RunRecord v3 = reader.run(2);
    const auto& t = v3.result.traces.at(0);
    QVERIFY(t.timing && t.timing->steps == 4);
    QCOMPARE(t.sampling.stop, (std::vector<std::string>{"\n\n", "The"}));
  }
};

QTEST_GUILESS_MAIN(TestSchemaMigrations)
#include "tst_schema_migrations.moc"
