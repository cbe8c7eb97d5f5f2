// Rank processes against rank threads, under `mpirun -np 2|4 tst_rank_processes`
// (tests/mpirun_test.sh; SHARDSCOPE_TEST_DEVICE=cuda SHARDSCOPE_TEST_BACKEND=nccl on a machine with
// a GPU per process: NCCL bootstrapped over MPI): every process loads the Hugging Face golden
// models as one rank of an engine over MPI (EngineOptions::process), and, as the reference, the
// same model as an engine of rank threads. Logits and ids must be bit-identical to the threads' and
// within the golden suite's tolerance of transformers. Failures on one rank (an error, a rank stuck
// before a collective) must fail the job on every process with one error naming the rank, and the
// next job must work; a cancel on rank 0 must stop every rank at the same step. Each test runs all
// of its jobs before it checks anything, so that one process's failed check cannot leave the others
// in a job.
#include <QtTest>

#include "common/tensor_checks.h"
#include "common/test_support.h"
#include "core/engine/engine.h"
#include "core/host_tensor_conversion.h"
#include "core/model/safetensors_file.h"
#include "core/parallel/mpi_rank_process.h"

using namespace shardscope;

namespace {

MpiRuntime* gMpi = nullptr;
std::shared_ptr<MpiRankProcess> gProcess;

struct Golden {
  std::vector<int64_t> inputIds;
  at::Tensor decode;  // [8, V]
  std::vector<int64_t> greedy;
};

Golden loadGolden(const std::string& model) {
  SafetensorsFile f(test::goldenModel(model) / "golden.safetensors");
  const auto get = [&](const char* n) { return f.view(f.entry(n)).clone(); };
  const auto ids = [](const at::Tensor& t) {
    return std::vector<int64_t>(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + t.numel());
  };
  return {ids(get("input_ids")), get("decode_logits"), ids(get("greedy_ids"))};
}

EngineOptions options(const std::string& model, bool processes, bool expertParallel = false) {
  EngineOptions o;
  o.model = test::goldenModel(model).string();
  o.tp = gMpi->size();
  o.dtype = DType::F32;
  o.expertParallel = expertParallel;
  o.device = test::deviceKind();
  o.backend = test::groupBackend();  // the threads' group (nccl with a GPU per rank)
  if (processes) o.process = gProcess;
  return o;
}

GenerateResult greedy(Engine& engine, const std::vector<int64_t>& prompt, int64_t tokens) {
  GenerateRequest r;
  r.prompts = {prompt};
  r.sampling.maxTokens = tokens;
  r.sampling.ignoreEos = true;
  r.returnLogits = true;
  return Engine::generateResult(engine.generate(r));
}

std::string errorOf(Engine& engine, const std::vector<int64_t>& prompt) {
  try {
    greedy(engine, prompt, 4);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

// Every process's value of `mine`, in rank order.
std::vector<int64_t> gathered(int64_t mine) {
  std::vector<int64_t> all(size_t(gMpi->size()));
  MPI_Allgather(&mine, 1, MPI_INT64_T, all.data(), 1, MPI_INT64_T, MPI_COMM_WORLD);
  return all;
}

}  // namespace

class TestRankProcesses : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void goldenModelsEqualRankThreads_data() {
    QTest::addColumn<QString>("model");
    QTest::addColumn<bool>("expertParallel");
    for (const char* m : {"qwen3-tiny", "qwen2-tiny", "llama-tiny", "qwen3-moe-tiny"})
      QTest::addRow("%s", m) << QString(m) << false;
    QTest::addRow("qwen3-moe-tiny, expert parallel") << QString("qwen3-moe-tiny") << true;
  }
  void goldenModelsEqualRankThreads() {
    QFETCH(QString, model);
    QFETCH(bool, expertParallel);
    const std::string name = model.toStdString();
    const Golden g = loadGolden(name);
    const int64_t steps = int64_t(g.greedy.size());
    GenerateResult processes, threads;
    std::string backend;
    {
      Engine engine(options(name, true, expertParallel));
      backend = engine.info().backend;
      processes = greedy(engine, g.inputIds, steps);
    }
    {
      Engine engine(options(name, false, expertParallel));
      threads = greedy(engine, g.inputIds, steps);
    }
    const bool cuda = test::device() == "cuda";
    QCOMPARE(backend, std::string(cuda ? "nccl+mpi" : "mpi"));
    QCOMPARE(processes.outputs[0].tokenIds, threads.outputs[0].tokenIds);
    QCOMPARE(processes.outputs[0].tokenIds, g.greedy);
    const at::Tensor ours = fromHostFloat(processes.outputs[0].logits);
    const at::Tensor ref = fromHostFloat(threads.outputs[0].logits);
    // The CPU path sums in the same order as rank threads: bit-identical. On GPUs both sum with
    // NCCL, whose order may depend on the communicator: within fp32 rounding.
    if (cuda) {
      QVERIFY2(test::maxRelativeError(ours, ref) <= 1e-5,
               test::closeToScaleMessage(ours, ref).c_str());
    } else {
      QVERIFY2(at::equal(ours, ref), test::closeToScaleMessage(ours, ref).c_str());
    }
    const double err = test::maxRelativeError(ours.narrow(0, 1, g.decode.size(0)), g.decode);
    QVERIFY2(err <= 1e-4, ("decode relative error to transformers " + std::to_string(err)).c_str());
  }

  void failureOnOneRankFailsEveryProcess_data() {
    QTest::addColumn<QString>("failure");
    QTest::addColumn<QString>("expectedError");
    QTest::newRow("throw") << "throw:1:1:0"
                           << "rank 1";
    // The others' watchdog fires, their abort reaches rank 1, every process fails.
    QTest::newRow("stuck") << "stuck:1:1:1"
                           << "timed out";
  }
  void failureOnOneRankFailsEveryProcess() {
    QFETCH(QString, failure);
    QFETCH(QString, expectedError);
    EngineOptions o = options("qwen3-tiny", true);
    o.collectiveTimeoutSeconds = 2;
    Engine engine(o);
    const Golden g = loadGolden("qwen3-tiny");
    engine.injectFailure(FailureInjection::parse(failure.toStdString()));
    const auto started = std::chrono::steady_clock::now();
    const std::string error = errorOf(engine, g.inputIds);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    const GenerateResult after = greedy(engine, g.inputIds, 4);  // a new group, the same answer
    QVERIFY2(error.find(expectedError.toStdString()) != std::string::npos, error.c_str());
    if (gMpi->rank() != 1) {  // the others name where it happened
      QVERIFY2(error.find("host " + gMpi->host()) != std::string::npos, error.c_str());
    }
    QVERIFY2(seconds < 10, qPrintable(QString::number(seconds)));
    const std::vector<int64_t> expected(g.greedy.begin(), g.greedy.begin() + 4);
    QCOMPARE(after.outputs[0].tokenIds, expected);
  }

  // Pipeline stages run as rank threads of one process: every rank process refuses them alike,
  // before any collective, saying what works instead.
  void pipelineStagesAreRefused() {
    EngineOptions o = options("qwen3-tiny", true);
    o.pp = 2;
    QString error;
    try {
      Engine engine(o);
    } catch (const std::exception& e) {
      error = e.what();
    }
    QVERIFY2(error.contains("pp=2: pipeline stages run as rank threads; rank processes support "
                            "tensor parallelism only"),
             qPrintable(error));
  }

  void cancelOnRankZeroStopsEveryRankAtTheSameStep() {
    Engine engine(options("qwen3-tiny", true));
    const Golden g = loadGolden("qwen3-tiny");
    GenerateRequest r;
    r.prompts = {g.inputIds};
    r.sampling.maxTokens = 200;
    r.sampling.ignoreEos = true;
    JobHandle h = engine.generate(r);
    // Only rank 0's handle: the decision reaches the others in the first step's broadcast.
    if (gMpi->rank() == 0) h.cancel();
    const GenerateResult result = Engine::generateResult(h);
    const auto counts = gathered(int64_t(result.outputs[0].tokenIds.size()));
    QCOMPARE(result.outputs[0].finishReason, std::string("cancelled"));
    for (int64_t c : counts) QCOMPARE(c, counts[0]);
    QVERIFY(counts[0] < 200);
  }
};

int main(int argc, char** argv) {
  MpiRuntime mpi(&argc, &argv);
  gMpi = &mpi;
  gProcess = std::make_shared<MpiRankProcess>(mpi);
  int failed = 0;
  {
    TestRankProcesses test;
    failed = QTest::qExec(&test, argc, argv);
  }
  gProcess.reset();  // its communicators go before MPI does
  int anyFailed = 0;
  MPI_Allreduce(&failed, &anyFailed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return anyFailed ? 1 : 0;
}

#include "tst_rank_processes.moc"
