// The session log under failure and concurrency: a writer process killed with SIGKILL in the
// middle of its commits, shardscope-cli killed in the middle of a logged generation (finished runs
// whole, the unfinished one marked interrupted, SQLite's integrity check passes), and a reader on
// its own connection beside a writer thread (no lock errors, no torn run).
#include <QtTest>
#include <atomic>
#include <csignal>
#include <fstream>
#include <thread>

#include "common/session_values.h"
#include "common/test_support.h"
#include "core/sha256.h"
#include "core/store/session_store.h"
#include "core/store/sqlite_database.h"

using namespace shardscope;
using namespace shardscope::store;
using test::matchesPattern;
using test::patternResult;

namespace {

QString q(const std::string& s) {
  return QString::fromStdString(s);
}

std::string fileShaOf(const trace::SavedValue& v) {
  return sha256Hex(
      std::string(reinterpret_cast<const char*>(v.tensor.bytes.data()), v.tensor.bytes.size()));
}

// Child mode for the crash test: records runs with pattern values until killed.
int writerChild(const char* path) {
  SessionStore s(path);
  for (;;) {
    const int64_t id = s.beginRun("writer", "", "writer");
    s.finishRun(id, patternResult(id, 8, 250'000), RunStatus::Done);
  }
}

}  // namespace

class TestSessionCrashSafety : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  // A writer killed in the middle of its commits: every run it finished is whole, the one it was
  // writing is marked interrupted, and the file passes SQLite's integrity check.
  void survivesAKilledWriter() {
    test::TempDir dir;
    const auto path = dir.path() / "s.db";
    QProcess child;
    child.start(QCoreApplication::applicationFilePath(), {"--writer", q(path.string())});
    QVERIFY(child.waitForStarted());
    int64_t finished = 0;
    for (int i = 0; i < 200 && finished < 5; ++i) {
      QThread::msleep(50);
      if (!std::filesystem::exists(path)) continue;
      try {
        SessionStore reader(path, {.readOnly = true});
        finished = 0;
        for (const auto& r : reader.runs()) finished += r.status == store::RunStatus::Done;
      } catch (const StoreError&) {  // the file may be mid-creation
      }
    }
    QVERIFY2(finished >= 5, "the writer child did not record runs");
    QThread::msleep(37);
    ::kill(pid_t(child.processId()), SIGKILL);
    child.waitForFinished();
    SessionStore s(path);
    const auto runs = s.runs();
    int done = 0, interrupted = 0;
    for (const auto& r : runs) {
      if (r.status == store::RunStatus::Done) {
        ++done;
        QVERIFY2(matchesPattern(s.run(r.id), 8, 250'000), ("run " + std::to_string(r.id)).c_str());
      } else {
        QCOMPARE(q(store::runStatusName(r.status)), QString("interrupted"));
        QVERIFY(q(s.run(r.id).summary.error).contains("ended before the run finished"));
        ++interrupted;
      }
    }
    qInfo("writer killed after %d finished runs; %d unfinished run marked interrupted", done,
          interrupted);
    QVERIFY(done >= 5);
    QVERIFY(interrupted <= 1);
    SqliteDatabase db(path, SqliteDatabase::Mode::ReadOnly, 1000);
    auto check = db.prepare("PRAGMA integrity_check");
    QVERIFY(check.step());
    QCOMPARE(q(check.text(0)), QString("ok"));
  }

  // shardscope-cli logging a long generation is killed: the earlier runs are intact, the
  // unfinished one is marked interrupted when the file is next opened for writing.
  void cliRunKilledMidRunIsInterrupted() {
    test::TempDir dir;
    const auto path = dir.path() / "s.db";
    const auto shortScript = dir.path() / "short.py", longScript = dir.path() / "long.py";
    std::ofstream(shortScript) << "model = VLLM(\"demo\")\n"
                                  "with model.trace(\"Hello\", max_tokens=2):\n"
                                  "    h = model.model.layers[0].mlp.output.save()\n";
    std::ofstream(longScript) << "model = VLLM(\"demo\")\n"
                                 "with model.trace(\"Hello\", max_tokens=4000, ignore_eos=True):\n"
                                 "    h = model.model.layers[0].mlp.output.save()\n";
    for (int i = 0; i < 2; ++i) {
      QProcess p;
      p.start(SHARDSCOPE_CLI, {"run", q(shortScript.string()), "--log", q(path.string())});
      QVERIFY(p.waitForFinished(120000));
      QCOMPARE(p.exitCode(), 0);
    }
    std::vector<std::string> before;
    {
      SessionStore s(path, {.readOnly = true});
      for (int64_t id : {1, 2})
        before.push_back(s.value(id, "h").tensor.shapeString() + fileShaOf(s.value(id, "h")));
    }
    QProcess p;
    p.start(SHARDSCOPE_CLI, {"run", q(longScript.string()), "--log", q(path.string())});
    QVERIFY(p.waitForStarted());
    bool running = false;
    for (int i = 0; i < 600 && !running; ++i) {
      QThread::msleep(20);
      SessionStore reader(path, {.readOnly = true});
      const auto runs = reader.runs();
      running = runs.size() == 3 && runs[2].status == store::RunStatus::Running;
    }
    QVERIFY2(running, "the third run never showed as running");
    QThread::msleep(300);
    QCOMPARE(p.state(), QProcess::Running);
    ::kill(pid_t(p.processId()), SIGKILL);
    p.waitForFinished();
    {
      SessionStore reader(path, {.readOnly = true});  // readers do not mark
      QCOMPARE(q(store::runStatusName(reader.runs()[2].status)), QString("running"));
    }
    SessionStore s(path);
    const auto runs = s.runs();
    QCOMPARE(runs.size(), size_t(3));
    QCOMPARE(q(store::runStatusName(runs[0].status)), QString("done"));
    QCOMPARE(q(store::runStatusName(runs[1].status)), QString("done"));
    QCOMPARE(q(store::runStatusName(runs[2].status)), QString("interrupted"));
    for (int64_t id : {1, 2}) {
      QCOMPARE(q(s.value(id, "h").tensor.shapeString() + fileShaOf(s.value(id, "h"))),
               q(before[size_t(id - 1)]));
    }
  }

  // A reader on its own connection while another thread records runs: no lock errors, and a run
  // is either absent, running without values, or done with every value whole.
  void readerBesideWriter() {
    test::TempDir dir;
    const auto path = dir.path() / "s.db";
    { SessionStore create(path); }
    std::atomic<bool> stop{false};
    std::string writerError;
    std::thread writer([&] {
      try {
        SessionStore s(path);
        for (int i = 0; i < 40; ++i) {
          const int64_t id = s.beginRun("w", "", "w.py");
          s.finishRun(id, patternResult(id, 3, 20'000), RunStatus::Done);
        }
      } catch (const std::exception& e) {
        writerError = e.what();
      }
      stop = true;
    });
    SessionStore reader(path, {.readOnly = true});
    int checked = 0;
    std::string readerError;
    try {
      while (!stop) {
        for (const auto& r : reader.runs()) {
          const RunRecord rec = reader.run(r.id);
          if (rec.summary.status == store::RunStatus::Done) {
            if (!matchesPattern(rec, 3, 20'000)) readerError = "torn run " + std::to_string(r.id);
            ++checked;
          } else if (!rec.result.traces.empty()) {
            readerError = "a running run showed values";
          }
        }
      }
    } catch (const std::exception& e) {
      readerError = e.what();
    }
    writer.join();
    QVERIFY2(writerError.empty(), writerError.c_str());
    QVERIFY2(readerError.empty(), readerError.c_str());
    QVERIFY(checked > 40);
    QCOMPARE(reader.runs().size(), size_t(40));
  }
};

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--writer") return writerChild(argv[2]);
  QCoreApplication app(argc, argv);
  TestSessionCrashSafety t;
  return QTest::qExec(&t, argc, argv);
}

#include "tst_session_crash_safety.moc"
