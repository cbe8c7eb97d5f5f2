// shardscope-engine end to end (issue 18): rank processes started by mpirun, rank 0 serving
// shardscope-cli --engine (and `shardscope-cli run|generate --mpi`, the same ranks without it).
// Scripts (a subset of the trace suite, tests/trace/scripts/ rank_processes), generate and inspect
// print exactly what rank threads print; the client's session log records the engine; refused
// requests (malformed bytes, a wrong protocol version, an oversized or empty job, a missing or
// wrong token, a non-loopback address without a token) get an error and the engine keeps serving; a
// rank process killed with SIGKILL ends the running job with one error naming the rank and its host
// within 5 s, and no process is left.
#include <QtTest>

#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/client_unary_call.h>
#include <grpcpp/support/byte_buffer.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "common/engine_server_process.h"
#include "common/test_support.h"
#include "core/parallel/mpi_runtime.h"
#include "core/remote/engine_client.h"
#include "core/remote/engine_protocol.grpc.pb.h"
#include "core/remote/protocol_version.h"
#include "core/remote/wire_format.h"
#include "core/store/session_store.h"

using namespace shardscope;
using test::EngineServerProcess;
using test::freePort;

namespace {

struct Result {
  int code;
  QString out, err;
};

Result cli(const QStringList& args, int timeoutMs = 600000) {
  QProcess p;
  p.start(SHARDSCOPE_CLI, args);
  if (!p.waitForFinished(timeoutMs)) {
    p.kill();
    p.waitForFinished();
    return {-1, "", "timed out"};
  }
  return {p.exitCode(), QString::fromUtf8(p.readAllStandardOutput()),
          QString::fromUtf8(p.readAllStandardError())};
}

QString script(const char* name) {
  return QString::fromStdString(
      (test::sourceDir() / "tests/trace/scripts/rank_processes" / name).string());
}

bool processGone(qint64 pid) {
  return ::kill(pid_t(pid), 0) != 0 ||
         !std::ifstream("/proc/" + std::to_string(pid) + "/stat").good();
}

// The output of a script run on the engine and with rank threads.
void compareWithRankThreads(const QString& address, const QString& file, int tp) {
  const Result remote = cli({"run", file, "--engine", address});
  QVERIFY2(remote.code == 0, qPrintable(remote.err));
  const Result local = cli({"run", file, "--tp", QString::number(tp)});
  QVERIFY2(local.code == 0, qPrintable(local.err));
  QCOMPARE(remote.out, local.out);
  QVERIFY(!remote.out.isEmpty());
}

std::unique_ptr<remote::v1::EngineService::Stub> stubFor(const QString& address) {
  return remote::v1::EngineService::NewStub(
      grpc::CreateChannel(address.toStdString(), grpc::InsecureChannelCredentials()));
}

}  // namespace

class TestEngineServer : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() {
    if (QStandardPaths::findExecutable("mpirun").isEmpty())
      QSKIP("mpirun is not installed (apt-get install openmpi-bin libopenmpi-dev)");
    for (int np : {2, 4}) {
      engines_[np] = std::make_unique<EngineServerProcess>(np, QStringList{"--model", "demo"},
                                                           QString("127.0.0.1:%1").arg(freePort()));
    }
    for (auto& [np, e] : engines_) QVERIFY2(e->waitServing(), qPrintable(e->err()));
  }

  void scriptsEqualRankThreads_data() {
    QTest::addColumn<int>("np");
    QTest::addColumn<QString>("file");
    for (int np : {2, 4}) {
      for (const char* f : {"reads.py", "writes_and_steps.py"})
        QTest::addRow("np%d %s", np, f) << np << script(f);
    }
  }
  void scriptsEqualRankThreads() {
    QFETCH(int, np);
    QFETCH(QString, file);
    compareWithRankThreads(engines_[np]->address(), file, np);
  }

  // The rank-process path without the server (what the GPU machine runs: it has no gRPC).
  void mpiRunAndGenerateWithoutServerEqualRankThreads() {
    const QString mpirun =
        QString::fromStdString((test::sourceDir() / "tests/mpirun_test.sh").string());
    QProcess p;
    p.start("bash", {mpirun, "2", SHARDSCOPE_CLI, "run", "--mpi", script("writes_and_steps.py")});
    QVERIFY(p.waitForFinished(300000));
    QVERIFY2(p.exitCode() == 0, p.readAllStandardError().constData());
    const Result local = cli({"run", script("writes_and_steps.py"), "--tp", "2"});
    QCOMPARE(QString::fromUtf8(p.readAllStandardOutput()), local.out);
    const QStringList gen = {"generate", "--max-tokens", "5", "--quiet", "Once upon a time"};
    p.start("bash", QStringList{mpirun, "2", SHARDSCOPE_CLI} + gen + QStringList{"--mpi"});
    QVERIFY(p.waitForFinished(300000));
    QVERIFY2(p.exitCode() == 0, p.readAllStandardError().constData());
    QCOMPARE(QString::fromUtf8(p.readAllStandardOutput()), cli(gen + QStringList{"--tp", "2"}).out);
  }

  void generateAndInspectEqualRankThreads() {
    const QString address = engines_[2]->address();
    const QStringList gen = {"--max-tokens", "6", "--temperature",   "0.7",
                             "--seed",       "5", "Once upon a time"};
    const Result remote = cli(QStringList{"generate", "--engine", address} + gen);
    const Result local = cli(QStringList{"generate", "--tp", "2", "--quiet"} + gen);
    QVERIFY2(remote.code == 0 && local.code == 0, qPrintable(remote.err + local.err));
    QCOMPARE(remote.out, local.out);
    // Prompts given as ids travel as one prompt each --ids, not one a token (the local run makes
    // two prompts; one a token would make five continuations).
    const QStringList ids = {"--max-tokens", "4", "--ids", "785,6722,315", "--ids", "100,200"};
    const Result idsRemote = cli(QStringList{"generate", "--engine", address} + ids);
    const Result idsLocal = cli(QStringList{"generate", "--tp", "2", "--quiet"} + ids);
    QVERIFY2(idsRemote.code == 0 && idsLocal.code == 0, qPrintable(idsRemote.err + idsLocal.err));
    QCOMPARE(idsRemote.out, idsLocal.out);
    const Result inspectRemote = cli({"inspect", "--engine", address});
    const Result inspectLocal = cli({"inspect", "--tp", "2"});
    QVERIFY2(inspectRemote.code == 0, qPrintable(inspectRemote.err));
    QVERIFY(inspectRemote.out.startsWith("engine: shardscope-engine "));
    QCOMPARE(inspectRemote.out.section('\n', 1), inspectLocal.out);
  }

  void sessionLogStaysWithTheClientAndNamesTheEngine() {
    test::TempDir dir;
    const QString log = QString::fromStdString((dir.path() / "s.db").string());
    const Result r =
        cli({"run", script("reads.py"), "--engine", engines_[2]->address(), "--log", log});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    store::SessionStore store(log.toStdString());
    const auto runs = store.runs();
    QCOMPARE(runs.size(), size_t(1));
    const store::RunRecord rec = store.run(runs[0].id);
    QCOMPARE(QString(store::runStatusName(rec.summary.status)), QString("done"));
    QCOMPARE(rec.result.models.size(), size_t(1));
    const std::string engine = rec.result.models[0].engineVersion;
    QVERIFY2(engine.find("2 rank processes (mpi") != std::string::npos, engine.c_str());
    QVERIFY2(engine.find("rank 1 " + hostName()) != std::string::npos, engine.c_str());
    QVERIFY2(engine.find(engines_[2]->address().toStdString()) != std::string::npos,
             engine.c_str());
    QCOMPARE(rec.result.models[0].tp, 2);
    QVERIFY(!rec.result.traces.empty() && !rec.result.traces[0].values.empty());
  }

  // What the session log records of a GPU engine on two hosts: every rank's host and GPU (the
  // rank's place among its host's ranks) and the versions.
  void engineDescriptionNamesEveryRanksGpu() {
    remote::v1::EngineIdentity id;
    id.set_shardscope_version("0.1.0");
    id.set_libtorch_version("2.11.0");
    id.set_nccl_version("2.28.3");
    id.set_backend("nccl+mpi");
    id.set_device("cuda");
    id.set_tp(4);
    for (const char* h : {"a", "a", "b", "b"}) id.add_rank_hosts(h);
    QCOMPARE(remote::describeEngine(id, "127.0.0.1:5000"),
             std::string("shardscope-engine 0.1.0 at 127.0.0.1:5000: 4 rank processes (nccl+mpi, "
                         "cuda) on rank 0 a cuda:0, rank 1 a cuda:1, rank 2 b cuda:0, rank 3 b "
                         "cuda:1; LibTorch 2.11.0, NCCL 2.28.3"));
  }

  // A module's decoder layer crosses the wire; the field an older engine leaves unset reads as
  // outside the layers.
  void moduleLayersCrossTheWire() {
    ModelInfo m;
    m.modules = {
        {"model.model.embed_tokens", "embed_tokens", "VocabParallelEmbedding", 2, 0, {}, {}, -1},
        {"model.model.layers[3].mlp.experts", "experts", "FusedMoE", 4, 0, {}, {}, 3},
        {"model.model.layers[0]", "[0]", "Qwen3DecoderLayer", 2, 0, {}, {}, 0}};
    remote::v1::ModelInfo wire;
    remote::toWire(m, wire);
    const ModelInfo back = remote::fromWire(wire);
    QCOMPARE(back.modules.size(), size_t(3));
    QCOMPARE(back.modules[0].layer, -1);
    QCOMPARE(back.modules[1].layer, 3);
    QCOMPARE(back.modules[2].layer, 0);
    wire.mutable_modules(1)->clear_layer();
    QCOMPARE(remote::fromWire(wire).modules[1].layer, -1);
  }

  void refusedRequestsLeaveTheEngineServing() {
    const QString address = engines_[2]->address();
    auto stub = stubFor(address);
    {  // bytes that are no JobRequest
      grpc::ClientContext context;
      const grpc::internal::RpcMethod method("/shardscope.remote.v1.EngineService/Hello",
                                             grpc::internal::RpcMethod::NORMAL_RPC);
      grpc::Slice junk(std::string("\xff\xff\xff\xff\x0f", 5));
      grpc::ByteBuffer request(&junk, 1), reply;
      auto channel = grpc::CreateChannel(address.toStdString(), grpc::InsecureChannelCredentials());
      const grpc::Status s = grpc::internal::BlockingUnaryCall<grpc::ByteBuffer, grpc::ByteBuffer>(
          channel.get(), method, &context, request, &reply);
      QVERIFY(!s.ok());
    }
    {  // another protocol version
      grpc::ClientContext context;
      remote::v1::HelloRequest hello;
      hello.set_protocol_version(remote::kProtocolVersion + 1);
      remote::v1::HelloReply reply;
      const grpc::Status s = stub->Hello(&context, hello, &reply);
      QCOMPARE(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
      QVERIFY(s.error_message().find("protocol version") != std::string::npos);
    }
    const auto runStatus = [&](const remote::v1::JobRequest& job) {
      grpc::ClientContext context;
      auto reader = stub->Run(&context, job);
      remote::v1::JobEvent e;
      while (reader->Read(&e)) {
      }
      return reader->Finish();
    };
    remote::v1::JobRequest job;
    job.set_protocol_version(remote::kProtocolVersion);
    QCOMPARE(runStatus(job).error_code(), grpc::StatusCode::INVALID_ARGUMENT);  // no kind
    job.mutable_run()->set_source("");
    QCOMPARE(runStatus(job).error_code(), grpc::StatusCode::INVALID_ARGUMENT);  // empty script
    job.mutable_run()->set_source(std::string(size_t(remote::kMaxMessageBytes) + 1024, '#'));
    QCOMPARE(runStatus(job).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
    // The engine still serves.
    const Result r = cli({"run", script("reads.py"), "--engine", address});
    QVERIFY2(r.code == 0, qPrintable(r.err));
  }

  void nonLoopbackNeedsAPrivateToken() {
    test::TempDir dir;
    const QString tokenFile = QString::fromStdString((dir.path() / "token").string());
    {
      EngineServerProcess open(2, {"--model", "demo"}, QString("0.0.0.0:%1").arg(freePort()));
      QVERIFY(open.waitFinished(120000) != 0);
      QVERIFY2(open.err().contains("without an access token"), qPrintable(open.err()));
    }
    std::ofstream(tokenFile.toStdString()) << "s3cret-token\n";
    ::chmod(tokenFile.toLocal8Bit().constData(), 0644);
    {
      EngineServerProcess shared(2, {"--model", "demo", "--token-file", tokenFile},
                                 QString("0.0.0.0:%1").arg(freePort()));
      QVERIFY(shared.waitFinished(120000) != 0);
      QVERIFY2(shared.err().contains("chmod 600"), qPrintable(shared.err()));
    }
    ::chmod(tokenFile.toLocal8Bit().constData(), 0600);
    const int port = freePort();
    EngineServerProcess guarded(2, {"--model", "demo", "--token-file", tokenFile},
                                QString("0.0.0.0:%1").arg(port));
    QVERIFY2(guarded.waitServing(), qPrintable(guarded.err()));
    const QString address = QString("127.0.0.1:%1").arg(port);
    const Result none = cli({"inspect", "--engine", address});
    QCOMPARE(none.code, 1);
    QVERIFY2(none.err.contains("needs an access token"), qPrintable(none.err));
    const QString wrongFile = QString::fromStdString((dir.path() / "wrong").string());
    std::ofstream(wrongFile.toStdString()) << "s3cret-tokeN\n";
    ::chmod(wrongFile.toLocal8Bit().constData(), 0600);
    const Result wrong = cli({"inspect", "--engine", address, "--token-file", wrongFile});
    QCOMPARE(wrong.code, 1);
    QVERIFY2(wrong.err.contains("does not match"), qPrintable(wrong.err));
    const Result right = cli({"inspect", "--engine", address, "--token-file", tokenFile});
    QVERIFY2(right.code == 0, qPrintable(right.err));
  }

  void killedRankEndsTheJobWithOneError() {
    engines_.clear();  // the cores to this test
    EngineServerProcess engine(2, {"--model", "demo"}, QString("127.0.0.1:%1").arg(freePort()));
    QVERIFY2(engine.waitServing(), qPrintable(engine.err()));
    const qint64 rank0 = engine.pidOf(0), rank1 = engine.pidOf(1);
    QVERIFY(rank0 > 0 && rank1 > 0);
    test::TempDir dir;
    const QString file = QString::fromStdString((dir.path() / "long.py").string());
    std::ofstream(file.toStdString())
        << "model = VLLM(\"demo\")\n"
           "for i in range(1000000):\n"
           "    with model.trace(\"Hi\", max_tokens=32, ignore_eos=True) as tracer:\n"
           "        out = tracer.result.save()\n";
    QProcess client;
    client.start(SHARDSCOPE_CLI, {"run", file, "--engine", engine.address()});
    QVERIFY(client.waitForStarted());
    QVERIFY(!client.waitForFinished(3000));  // generating
    QElapsedTimer t;
    t.start();
    ::kill(pid_t(rank1), SIGKILL);
    QVERIFY(client.waitForFinished(15000));
    const double seconds = t.elapsed() / 1000.0;
    const QString err = QString::fromUtf8(client.readAllStandardError());
    QCOMPARE(client.exitCode(), 1);
    QVERIFY2(err.contains("engine lost") && err.contains("rank 1") &&
                 err.contains(QString::fromStdString(hostName())),
             qPrintable(err));
    QCOMPARE(err.count("error:"), 1);
    QVERIFY2(seconds < 5, qPrintable(QString::number(seconds) + " s\n" + err));
    QVERIFY(engine.waitFinished(20000) != 0);
    QTRY_VERIFY_WITH_TIMEOUT(processGone(rank0) && processGone(rank1), 10000);
  }

  void cleanupTestCase() { engines_.clear(); }

 private:
  std::map<int, std::unique_ptr<EngineServerProcess>> engines_;
};

QTEST_GUILESS_MAIN(TestEngineServer)
#include "tst_engine_server.moc"
