// The session log: round trips of every dtype, shape and run field; the value cap; refusal of
// corrupt, foreign and newer files (byte-identical afterwards); replay (identical, and after one
// weight changed); export to safetensors. Crash safety and a reader beside a writer:
// tst_session_crash_safety; migrations: tst_schema_migrations.
#include <QtTest>
#include <fstream>
#include <random>

#include "common/session_values.h"
#include "common/test_support.h"
#include "core/file_tree.h"
#include "core/host_tensor_conversion.h"
#include "core/model/model_source.h"
#include "core/model/safetensors_file.h"
#include "core/sha256.h"
#include "core/store/replay.h"
#include "core/store/run_recorder.h"
#include "core/store/schema.h"
#include "core/store/session_store.h"
#include "core/store/sqlite_database.h"
#include "core/store/value_export.h"
#include "core/store/value_summary.h"

using namespace shardscope;
using namespace shardscope::store;
using test::matchesPattern;
using test::patternResult;
using test::tensorValue;

namespace {

const std::vector<DType> kAllDTypes = {DType::F32, DType::F16, DType::BF16, DType::F64,
                                       DType::I64, DType::I32, DType::I16,  DType::I8,
                                       DType::U8,  DType::Bool};

HostTensor randomTensor(DType d, std::vector<int64_t> shape, uint32_t seed) {
  HostTensor t;
  t.dtype = d;
  t.shape = std::move(shape);
  t.bytes.resize(size_t(t.numel()) * dtypeSize(d));
  std::mt19937 rng(seed);
  for (auto& b : t.bytes) b = std::byte(rng() & (d == DType::Bool ? 1 : 0xff));
  return t;
}

std::string fileSha(const std::filesystem::path& p) {
  return sha256Hex(readFile(p));
}

QString q(const std::string& s) {
  return QString::fromStdString(s);
}

std::string demoScript(const std::string& extra = "") {
  return "model = VLLM(\"m\")\n"
         "with model.trace(\"The capital of France is\", max_tokens=4) as tracer:\n"
         "    h = model.model.layers[1].self_attn.o_proj.input.save()\n"
         "    logits = model.logits.save()\n" +
         extra;
}

trace::RunOptions demoOptions(const std::filesystem::path& modelDir, int tp = 1) {
  trace::RunOptions o;
  o.modelDirs["m"] = modelDir.string();
  o.tp = tp;
  o.device = test::deviceKind();
  o.dtype = DType::F32;
  o.backend = test::groupBackend();
  o.out = [](const std::string&) {};
  o.note = [](const std::string&) {};
  return o;
}

// Flips one element of a tensor of a safetensors file in place.
void changeOneWeight(const std::filesystem::path& file, const std::string& tensor) {
  size_t begin = 0;
  {
    SafetensorsFile f(file);
    begin = f.entry(tensor).begin;
  }
  std::fstream io(file, std::ios::in | std::ios::out | std::ios::binary);
  io.seekp(std::streamoff(begin));
  const float x = 0.75f;  // an element's new value (the demo weights are bf16: 0x3f40)
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  const uint16_t bf16 = uint16_t(bits >> 16);
  io.write(reinterpret_cast<const char*>(&bf16), 2);
}

}  // namespace

class TestSessionStore : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void roundTripsEveryDTypeAndShape() {
    test::TempDir dir;
    const auto path = dir.path() / "s.db";
    trace::RunResult in;
    in.traces.resize(1);
    uint32_t seed = 1;
    for (DType d : kAllDTypes) {
      for (const std::vector<int64_t>& shape :
           std::vector<std::vector<int64_t>>{{}, {0}, {3, 0}, {7}, {2, 3, 4}, {1, 1, 1, 5}}) {
        in.traces[0].values.push_back(
            tensorValue(std::string(dtypeName(d)) + HostTensor{d, shape, {}}.shapeString(),
                        randomTensor(d, shape, seed++)));
      }
    }
    int64_t id = 0;
    {
      SessionStore s(path);
      id = s.beginRun("types", "", "t.py");
      s.finishRun(id, in, RunStatus::Done);
    }
    SessionStore s(path);
    const RunRecord r = s.run(id);
    QCOMPARE(r.result.traces.size(), size_t(1));
    const auto& out = r.result.traces[0].values;
    QCOMPARE(out.size(), in.traces[0].values.size());
    for (size_t i = 0; i < out.size(); ++i) {
      const auto& a = in.traces[0].values[i];
      const auto& b = out[i];
      QCOMPARE(q(b.name), q(a.name));
      QCOMPARE(int(b.tensor.dtype), int(a.tensor.dtype));
      QCOMPARE(b.tensor.shape, a.tensor.shape);
      QVERIFY2(b.tensor.bytes == a.tensor.bytes, a.name.c_str());
      QVERIFY(b.hasData());
      const auto one = s.value(id, a.name);
      QVERIFY(one.tensor.bytes == a.tensor.bytes);
    }
  }

  void roundTripsEveryRunField() {
    test::TempDir dir;
    const auto path = dir.path() / "s.db";
    trace::RunResult in;
    trace::ModelIdentity m{"Qwen/Qwen3-8B",
                           "random:/x/config.json@3",
                           "/x",
                           std::string(64, 'a'),
                           "bfloat16",
                           "cuda",
                           "nccl",
                           2,
                           "0.1.0"};
    in.models = {m, m};
    in.models[1].name = "other";
    in.models[1].tp = 4;
    in.models[1].expertParallel = true;
    in.traces.resize(2);
    in.traces[0].sampling = {0.7,  40, 0.9, 18'446'744'073'709'551'557ull, 12, {1, 2, 151645},
                             true, {}};
    in.traces[1].modelIndex = 1;
    in.traces[0].invokes = {{{785, 6722}, {11, 12, 13}, "abc \xe2\x9c\x93", "stop"},
                            {{1}, {}, "", "length"}};
    in.traces[1].invokes = {{{5, 6, 7}, {8}, "x", "cancelled"}};
    trace::SavedValue r;
    r.name = "count";
    r.repr = "[1, 2.5, 'three']";
    in.traces[1].values.push_back(r);
    in.printed = "line one\nline two\n";
    const std::string script = "model = VLLM(\"Qwen/Qwen3-8B\")\n# \xc3\xa9\n";
    int64_t id = 0, failed = 0;
    {
      SessionStore s(path, {.session = "study"});
      id = s.beginRun("my title", script, "dir/script.py");
      s.finishRun(id, in, RunStatus::Done);
      failed = s.beginRun("bad", "x = (", "bad.py", id);
      s.finishRun(failed, {}, RunStatus::Failed, "bad.py:1: unexpected end of input");
    }
    SessionStore s(path, {.session = "study", .readOnly = true});
    const RunRecord out = s.run(id);
    QCOMPARE(q(out.summary.title), QString("my title"));
    QCOMPARE(q(out.summary.session), QString("study"));
    QCOMPARE(q(out.summary.scriptFile), QString("dir/script.py"));
    QCOMPARE(q(out.script), q(script));
    QCOMPARE(q(store::runStatusName(out.summary.status)), QString("done"));
    QVERIFY(out.summary.startedMs > 1'700'000'000'000);
    QVERIFY(out.summary.endedMs >= out.summary.startedMs);
    QCOMPARE(out.pid, int64_t(getpid()));
    QCOMPARE(q(out.result.printed), q(in.printed));
    QCOMPARE(out.result.models.size(), size_t(2));
    const auto& mo = out.result.models[0];
    QCOMPARE(q(mo.name + mo.spec + mo.path + mo.configSha256 + mo.dtype + mo.device + mo.backend +
               mo.engineVersion),
             q(m.name + m.spec + m.path + m.configSha256 + m.dtype + m.device + m.backend +
               m.engineVersion));
    QCOMPARE(mo.tp, 2);
    QCOMPARE(out.result.models[1].tp, 4);
    QVERIFY(!mo.expertParallel);
    QVERIFY(out.result.models[1].expertParallel);
    QCOMPARE(out.result.traces.size(), size_t(2));
    const auto& sp = out.result.traces[0].sampling;
    QCOMPARE(sp.temperature, 0.7);
    QCOMPARE(sp.topK, int64_t(40));
    QCOMPARE(sp.topP, 0.9);
    QCOMPARE(sp.seed, 18'446'744'073'709'551'557ull);
    QCOMPARE(sp.maxTokens, int64_t(12));
    QCOMPARE(sp.stopTokenIds, (std::vector<int64_t>{1, 2, 151645}));
    QVERIFY(sp.ignoreEos);
    QCOMPARE(out.result.traces[1].modelIndex, 1);
    QCOMPARE(out.result.traces[0].invokes.size(), size_t(2));
    const auto& i0 = out.result.traces[0].invokes[0];
    QCOMPARE(i0.promptIds, (std::vector<int64_t>{785, 6722}));
    QCOMPARE(i0.tokenIds, (std::vector<int64_t>{11, 12, 13}));
    QCOMPARE(q(i0.text), q("abc \xe2\x9c\x93"));
    QCOMPARE(q(i0.finishReason), QString("stop"));
    QVERIFY(out.result.traces[0].invokes[1].tokenIds.empty());
    QCOMPARE(q(out.result.traces[1].invokes[0].finishReason), QString("cancelled"));
    QCOMPARE(q(*out.result.traces[1].values[0].repr), q(*r.repr));
    const RunRecord bad = s.run(failed);
    QCOMPARE(q(store::runStatusName(bad.summary.status)), QString("failed"));
    QCOMPARE(q(bad.summary.error), QString("bad.py:1: unexpected end of input"));
    QCOMPARE(bad.summary.replayOf.value_or(0), id);
    QCOMPARE(s.runs().size(), size_t(2));
    QVERIFY_THROWS_EXCEPTION(StoreError, s.run(99));
    QVERIFY_THROWS_EXCEPTION(StoreError, s.value(id, "nope"));
  }

  // The GUI view a run was made for reads back as written (tst_run_view: its JSON).
  void roundTripsRunViews() {
    test::TempDir dir;
    SessionStore s(dir.path() / "v.db");
    const std::vector<RunView> views = {
        RunView{},
        RunView::of(RunView::Kind::TopK),
        RunView::read("model.model.layers[1].self_attn.o_proj.input", 3),
        RunView::sweepLayer(2, 151643),
        RunView::expertAblation(1, 7),
        RunView::attentionPattern(0, 5),
    };
    std::vector<int64_t> ids;
    for (const RunView& v : views) {
      ids.push_back(s.beginRun("r", "", "gui.py", {}, v));
      s.finishRun(ids.back(), {}, RunStatus::Done);
    }
    const auto runs = s.runs();
    QCOMPARE(runs.size(), views.size());
    for (size_t i = 0; i < views.size(); ++i) {
      QVERIFY2(runs[i].view == views[i], runViewJson(runs[i].view).c_str());
      QVERIFY(s.run(ids[i]).summary.view == views[i]);
    }
  }

  // A run's status is stored as its name and read back as the enum; a name no ShardScope writes
  // is an error that quotes it.
  void runStatusNamesRoundTrip() {
    for (RunStatus s :
         {RunStatus::Running, RunStatus::Done, RunStatus::Failed, RunStatus::Interrupted})
      QCOMPARE(int(parseRunStatus(runStatusName(s))), int(s));
    try {
      parseRunStatus("paused");
      QFAIL("an unknown status was accepted");
    } catch (const Error& e) {
      QVERIFY2(std::string(e.what()).find("'paused'") != std::string::npos, e.what());
    }
  }

  void keepsLargeValuesAsSummaries() {
    test::TempDir dir;
    HostTensor big = randomTensor(DType::F32, {1000, 300}, 7);  // 1.2 MB
    for (int64_t i = 0; i < big.numel(); ++i) {
      const float x = std::sin(float(i)) * 3.0f;
      std::memcpy(big.bytes.data() + i * 4, &x, 4);
    }
    trace::RunResult in;
    in.traces.resize(1);
    in.traces[0].values = {tensorValue("big", big),
                           tensorValue("small", randomTensor(DType::BF16, {4, 8}, 3))};
    SessionStore s(dir.path() / "s.db", {.valueCapBytes = 1'000'000});
    const int64_t id = s.beginRun("cap", "", "cap.py");
    s.finishRun(id, in, RunStatus::Done);
    const auto stored = s.value(id, "big");
    QVERIFY(!stored.hasData());
    QVERIFY(stored.summary.has_value());
    QCOMPARE(stored.tensor.shape, big.shape);
    QCOMPARE(int(stored.tensor.dtype), int(DType::F32));
    QVERIFY2(stored.note.find("over the session's value cap") != std::string::npos,
             stored.note.c_str());
    const auto expect = summarize(big);
    QCOMPARE(stored.summary->min, expect.min);
    QCOMPARE(stored.summary->max, expect.max);
    QCOMPARE(stored.summary->mean, expect.mean);
    QCOMPARE(stored.summary->norm, expect.norm);
    QVERIFY(expect.max > 2.9 && expect.min < -2.9);
    QVERIFY(s.value(id, "small").hasData());
    QCOMPARE(s.runs()[0].valueCount, int64_t(2));
  }

  // A run's traces keep their wall time and steps (absent stays absent) and their stop strings;
  // the summary adds them up.
  void roundTripsTimingAndStopStrings() {
    test::TempDir dir;
    const auto path = dir.path() / "s.db";
    trace::RunResult in;
    in.traces.resize(3);
    in.traces[0].timing = trace::TraceTiming{0.0123, 3};
    in.traces[0].sampling.stop = {"\n", "caf\xc3\xa9", ""};
    in.traces[2].timing = trace::TraceTiming{1.5, 40};
    int64_t id = 0;
    {
      SessionStore s(path);
      id = s.beginRun("timed", "", "t.py");
      s.finishRun(id, in, RunStatus::Done);
    }
    SessionStore s(path, {.readOnly = true});
    const RunRecord out = s.run(id);
    QCOMPARE(out.result.traces.size(), size_t(3));
    QCOMPARE(out.result.traces[0].timing->wallSeconds, 0.0123);
    QCOMPARE(out.result.traces[0].timing->steps, int64_t(3));
    QVERIFY(!out.result.traces[1].timing);
    QCOMPARE(out.result.traces[2].timing->steps, int64_t(40));
    QCOMPARE(out.result.traces[0].sampling.stop, in.traces[0].sampling.stop);
    QVERIFY(out.result.traces[1].sampling.stop.empty());
    QCOMPARE(out.summary.traceCount, int64_t(3));
    QCOMPARE(out.summary.traceSeconds.value_or(-1), 1.5123);
    QCOMPARE(out.summary.steps, int64_t(43));
  }

  // A trace's stop strings that are not a JSON list of strings are damage, named as such.
  void refusesDamagedStopStrings() {
    test::TempDir dir;
    const auto path = dir.path() / "s.db";
    {
      SessionStore s(path);
      trace::RunResult in;
      in.traces.resize(1);
      s.finishRun(s.beginRun("t", "", "t.py"), in, RunStatus::Done);
    }
    {
      SqliteDatabase db(path, SqliteDatabase::Mode::ReadWriteCreate, 1000);
      db.exec("UPDATE traces SET stop = '[1, 2]'");
    }
    SessionStore s(path, {.readOnly = true});
    try {
      s.run(1);
      QFAIL("a damaged stop list was read");
    } catch (const StoreError& e) {
      QVERIFY2(q(e.what()).contains("stop strings are '[1, 2]'"), e.what());
    }
  }

  void refusesFilesItCannotUse_data() {
    QTest::addColumn<QString>("kind");
    QTest::addColumn<QString>("message");
    QTest::newRow("not sqlite") << "text"
                                << "not a SQLite database";
    QTest::newRow("foreign") << "foreign"
                             << "another program";
    QTest::newRow("newer") << "newer"
                           << "newer ShardScope";
    QTest::newRow("corrupt page") << "corrupt"
                                  << "damaged";
    QTest::newRow("truncated") << "truncated"
                               << "damaged";
  }
  void refusesFilesItCannotUse() {
    QFETCH(QString, kind);
    QFETCH(QString, message);
    test::TempDir dir;
    const auto path = dir.path() / "f.db";
    if (kind == "text") {
      std::ofstream(path) << "these are my notes, not a database\n";
    } else if (kind == "foreign") {
      SqliteDatabase db(path, SqliteDatabase::Mode::ReadWriteCreate, 1000);
      db.exec("CREATE TABLE contacts(name TEXT); INSERT INTO contacts VALUES ('Ada')");
    } else {
      {
        SessionStore s(path);
        for (int i = 0; i < 6; ++i) {
          const int64_t id = s.beginRun("r", std::string(3000, 'x'), "r.py");
          s.finishRun(id, patternResult(id, 4, 3000), RunStatus::Done);
        }
      }
      if (kind == "newer") {
        SqliteDatabase db(path, SqliteDatabase::Mode::ReadWrite, 1000);
        db.exec("PRAGMA user_version = " + std::to_string(schemaVersion() + 1));
      } else {
        QVERIFY(!std::filesystem::exists(path.string() + "-wal") ||
                std::filesystem::file_size(path.string() + "-wal") == 0);
        const auto size = std::filesystem::file_size(path);
        QVERIFY(size > 40'000);
        if (kind == "truncated") {
          std::filesystem::resize_file(path, size / 2);
        } else {
          // Overwrite the start (page header or overflow pointer) of every other page after
          // the first; the page size is in the file header (bytes 16-17, 1 meaning 65536).
          std::fstream io(path, std::ios::in | std::ios::out | std::ios::binary);
          unsigned char ps[2];
          io.seekg(16);
          io.read(reinterpret_cast<char*>(ps), 2);
          const size_t pageSize = ps[0] == 0 && ps[1] == 1 ? 65536 : size_t(ps[0]) * 256 + ps[1];
          QVERIFY(size / pageSize >= 3);
          for (size_t page = 1; page < size / pageSize; page += 2) {
            io.seekp(std::streamoff(page * pageSize));
            const std::string junk(64, '\x5a');
            io.write(junk.data(), std::streamsize(junk.size()));
          }
        }
      }
    }
    const std::string before = fileSha(path);
    const auto sizeBefore = std::filesystem::file_size(path);
    try {
      SessionStore s(path);
      QFAIL("opening should have failed");
    } catch (const StoreError& e) {
      QVERIFY2(QString(e.what()).contains(message), e.what());
      QVERIFY2(QString(e.what()).contains(q(path.string())), e.what());
      QVERIFY2(QString(e.what()).contains("left as it is"), e.what());
    }
    QCOMPARE(fileSha(path), before);
    QCOMPARE(std::filesystem::file_size(path), sizeBefore);
  }

  // Rows that disagree with each other (found by fuzz/fuzz_session_store.cpp: the readers indexed
  // a value's bytes by its shape, and `show --value` read past them) are refused as damage.
  void refusesDamagedRows_data() {
    QTest::addColumn<QString>("sql");
    QTest::addColumn<QString>("message");
    QTest::newRow("bytes shorter than the shape")
        << "UPDATE saved_values SET shape = '[5, 4]' WHERE idx = 0"
        << "holds 64 bytes for shape [5, 4] of float32";
    QTest::newRow("shape bytes wrap around")
        << "UPDATE saved_values SET shape = '[2305843009213693952]', data = x'' WHERE idx = 0"
        << "a saved value's shape is '[2305843009213693952]'";
    QTest::newRow("shape not a list")
        << "UPDATE saved_values SET shape = '{\"a\": 1}' WHERE idx = 0"
        << "a saved value's shape is";
    QTest::newRow("invoke of a missing trace") << "UPDATE invokes SET trace_idx = 7"
                                               << "a row refers to trace 7 of a run with 1";
    QTest::newRow("a view that is not JSON") << "UPDATE runs SET view = 'sweep layer 2'"
                                             << "run 1: a run's view is not a JSON object";
    QTest::newRow("negative schema version") << "PRAGMA user_version = -1"
                                             << "schema version -1";
  }
  void refusesDamagedRows() {
    QFETCH(QString, sql);
    QFETCH(QString, message);
    test::TempDir dir;
    const auto path = dir.path() / "d.db";
    int64_t id = 0;
    {
      SessionStore s(path);
      id = s.beginRun("r", "x = 1", "r.py");
      trace::RunResult result = patternResult(id, 1, 16);
      result.traces[0].invokes.push_back({{1, 2}, {3}, "t", "length"});
      s.finishRun(id, result, RunStatus::Done);
    }
    {
      SqliteDatabase db(path, SqliteDatabase::Mode::ReadWrite, 1000);
      db.exec(sql.toStdString());
    }
    try {
      SessionStore s(path);
      s.value(id, s.run(id).result.traces.at(0).values.at(0).name);
      QFAIL("reading the damaged run should have failed");
    } catch (const StoreError& e) {
      QVERIFY2(QString(e.what()).contains(message), e.what());
      QVERIFY2(QString(e.what()).contains("damaged"), e.what());
    }
  }

  void replayIsIdenticalThenSeesAChangedWeight() {
    test::TempDir dir;
    const auto model = dir.path() / "model";
    std::filesystem::create_directories(model);
    for (const auto& e : std::filesystem::directory_iterator(ensureDemoModel()))
      std::filesystem::copy_file(e.path(), model / e.path().filename());
    SessionStore s(dir.path() / "s.db");
    trace::ScriptRunner runner(demoOptions(model, 2));
    const RecordedRun recorded = runRecorded(s, runner, demoScript(), "demo.py", "demo", {},
                                             nullptr, RunView::of(RunView::Kind::Generate));
    QCOMPARE(int(recorded.status), int(RunStatus::Done));
    QCOMPARE(s.run(recorded.id).result.models.at(0).tp, 2);
    // The trace's wall time and steps as the runner measured them (one request: a step a token).
    const trace::TraceRecord& traced = s.run(recorded.id).result.traces.at(0);
    QVERIFY(traced.timing && traced.timing->wallSeconds > 0);
    QCOMPARE(traced.timing->steps, int64_t(traced.invokes.at(0).tokenIds.size()));
    QVERIFY(traced.timing->steps >= 1);

    ReplayOptions o;
    o.run = demoOptions(model);
    const ReplayReport same = replayRun(s, recorded.id, o);
    QVERIFY(same.identical());
    QCOMPARE(same.values.size(), size_t(2));
    for (const auto& v : same.values) QCOMPARE(q(v.diff.detail), QString("bit-identical"));
    QCOMPARE(same.texts.size(), size_t(1));
    QVERIFY(same.texts[0].same);
    QVERIFY(same.replayId > recorded.id);
    QCOMPARE(s.run(same.replayId).summary.replayOf.value_or(0), recorded.id);
    QVERIFY(s.run(same.replayId).summary.view == RunView::of(RunView::Kind::Generate));

    changeOneWeight(model / "model.safetensors", "model.layers.0.mlp.down_proj.weight");
    const ReplayReport changed = replayRun(s, recorded.id, o);
    QVERIFY(!changed.identical());
    for (const auto& v : changed.values) {
      QVERIFY2(!v.diff.identical, v.name.c_str());
      QVERIFY(v.diff.maxAbs > 0 && v.diff.relative > 0);
      QVERIFY2(q(v.diff.detail).startsWith("differs: max abs"), v.diff.detail.c_str());
    }
  }

  void exportsSafetensors() {
    test::TempDir dir;
    trace::RunResult in;
    in.traces.resize(2);
    in.traces[0].values = {tensorValue("a", randomTensor(DType::BF16, {3, 4}, 1))};
    in.traces[1].values = {tensorValue("a", randomTensor(DType::F32, {2}, 2)),
                           tensorValue("ids", randomTensor(DType::I64, {5}, 3))};
    trace::SavedValue text;
    text.name = "n";
    text.repr = "3";
    in.traces[1].values.push_back(text);
    SessionStore s(dir.path() / "s.db");
    const int64_t id = s.beginRun("e", "", "e.py");
    s.finishRun(id, in, RunStatus::Done);
    const auto out = dir.path() / "out.safetensors";
    const ExportReport report = exportRun(s, id, out);
    QCOMPARE(report.written.size(), size_t(3));
    QCOMPARE(report.skipped.size(), size_t(1));
    SafetensorsFile f(out);
    QVERIFY(f.contains("a@trace0") && f.contains("a") && f.contains("ids"));
    QVERIFY(toHost(f.view(f.entry("a@trace0"))).bytes == in.traces[0].values[0].tensor.bytes);
    QVERIFY(toHost(f.view(f.entry("a"))).bytes == in.traces[1].values[0].tensor.bytes);
    const HostTensor ids = toHost(f.view(f.entry("ids")));
    QCOMPARE(int(ids.dtype), int(DType::I64));
    QVERIFY(ids.bytes == in.traces[1].values[1].tensor.bytes);
  }
};

QTEST_GUILESS_MAIN(TestSessionStore)

#include "tst_session_store.moc"
