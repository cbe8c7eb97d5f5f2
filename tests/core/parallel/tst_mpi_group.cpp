// MpiGroup and PeerAbortGroup: collectives between rank processes, run under
// `mpirun -np 2|4 tst_mpi_group` (tests/mpirun_test.sh). Every process computes the same
// collective with a LocalGroup of rank threads as the reference, and its own rank's result must be
// bit-identical to it. Each test runs all of its collectives before it checks anything, so a
// failed check on one process never leaves the others waiting in a collective.
#include <QtTest>

#include <unistd.h>

#include <chrono>
#include <thread>

#include "common/run_ranks.h"
#include "core/error.h"
#include "core/parallel/mpi_group.h"
#include "core/parallel/mpi_rank_process.h"
#include "core/parallel/peer_abort_group.h"

using namespace shardscope;

namespace {

MpiRuntime* gMpi = nullptr;

// Different data on every rank, reproducible by any process (and rank thread) for any rank, with
// mantissas that make the order of a sum matter.
at::Tensor rankData(int rank, at::ScalarType dtype) {
  const at::Tensor i = at::arange(60, at::kDouble).view({3, 4, 5});
  at::Tensor t = (at::sin(i * (1.37 + rank)) * (3.1 + rank)).to(at::kFloat);
  return dtype == at::kLong ? (t * 100).to(at::kLong) : t.to(dtype);
}

// What rank `rank` of LocalGroup rank threads gets from `fn`.
template <class F>
at::Tensor localReference(int size, int rank, F fn) {
  std::vector<at::Tensor> results(static_cast<size_t>(size));
  test::runRanks(size, [&](int r, ProcessGroup& g) { results[size_t(r)] = fn(r, g); });
  return results[size_t(rank)];
}

std::string where() {
  return "host " + gMpi->host() + ", pid " + std::to_string(::getpid());
}

}  // namespace

class TestMpiGroup : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() { QVERIFY(gMpi->size() >= 2); }

  void collectivesEqualRankThreads_data() {
    QTest::addColumn<int>("dtype");
    QTest::newRow("f32") << int(at::kFloat);
    QTest::newRow("bf16") << int(at::kBFloat16);
    QTest::newRow("i64") << int(at::kLong);
  }
  void collectivesEqualRankThreads() {
    QFETCH(int, dtype);
    const auto type = at::ScalarType(dtype);
    const int size = gMpi->size(), rank = gMpi->rank();
    auto group = MpiGroup::create(MPI_COMM_WORLD);
    std::vector<std::pair<std::string, at::Tensor>> got, want;
    for (int64_t dim : {0, 1, -1}) {
      const auto gather = [&](int r, ProcessGroup& g) {
        return g.allGather(rankData(r, type), dim);
      };
      got.emplace_back("allGather dim " + std::to_string(dim), gather(rank, *group));
      want.emplace_back("", localReference(size, rank, gather));
    }
    const auto sum = [&](int r, ProcessGroup& g) {
      at::Tensor t = rankData(r, type);
      g.allReduceSum(t);
      return t;
    };
    got.emplace_back("allReduceSum", sum(rank, *group));
    want.emplace_back("", localReference(size, rank, sum));
    const auto strided = [&](int r, ProcessGroup& g) {
      at::Tensor t = rankData(r, type).transpose(0, 2);  // not contiguous: summed in place
      g.allReduceSum(t);
      return t.contiguous();
    };
    got.emplace_back("allReduceSum, strided", strided(rank, *group));
    want.emplace_back("", localReference(size, rank, strided));
    for (int root = 0; root < size; ++root) {
      const auto bcast = [&](int r, ProcessGroup& g) {
        at::Tensor t = rankData(r, type);
        g.broadcast(t, root);
        return t;
      };
      got.emplace_back("broadcast from " + std::to_string(root), bcast(rank, *group));
      want.emplace_back("", localReference(size, rank, bcast));
    }
    group->barrier();
    for (size_t i = 0; i < got.size(); ++i) {
      QVERIFY2(got[i].second.scalar_type() == want[i].second.scalar_type(), got[i].first.c_str());
      QVERIFY2(at::equal(got[i].second, want[i].second), got[i].first.c_str());
    }
  }

  void oneRankAbortWakesEveryProcess() {
    const int rank = gMpi->rank();
    PeerAbortGroup group(MpiGroup::create(MPI_COMM_WORLD), MPI_COMM_WORLD, where());
    std::string error;
    const auto started = std::chrono::steady_clock::now();
    if (rank == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      group.abort("rank 1 failed: injected");
    } else {
      try {
        at::Tensor t = rankData(rank, at::kFloat);
        group.allReduceSum(t);
        error = "the collective completed although rank 1 never joined it";
      } catch (const CollectiveAborted& e) {
        error = e.what();
      }
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    MPI_Barrier(MPI_COMM_WORLD);
    QVERIFY(group.aborted());
    if (rank == 1) return;
    QVERIFY2(error.find("rank 1 failed: injected") != std::string::npos, error.c_str());
    QVERIFY2(error.find("host " + gMpi->host()) != std::string::npos, error.c_str());
    QVERIFY2(seconds < 5, qPrintable(QString::number(seconds)));
    QVERIFY_THROWS_EXCEPTION(Error, group.reset());
  }

  void missedCollectiveTimesOutOnTheOthers() {
    const int rank = gMpi->rank();
    auto group = MpiGroup::create(MPI_COMM_WORLD);
    group->setOptions({std::chrono::milliseconds(300)});
    std::string error;
    if (rank != 0) {
      try {
        group->barrier();
      } catch (const CollectiveTimeout& e) {
        error = e.what();
      }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) return;  // it never called the barrier
    QVERIFY2(error.find("collective barrier timed out") != std::string::npos, error.c_str());
    QVERIFY(group->aborted());
  }

  // The wrapped group's watchdog names only its rank ("on rank 1 (MPI)", "(NCCL)"): the rank
  // process's wrapper adds the host, so a timeout reads alike on the CPU and on GPUs, and tells
  // the peers at once (rank 0, which never called the barrier, is aborted too).
  void timeoutThroughPeerAbortNamesTheHost() {
    const int rank = gMpi->rank();
    PeerAbortGroup group(MpiGroup::create(MPI_COMM_WORLD), MPI_COMM_WORLD, where());
    group.setOptions({std::chrono::milliseconds(300)});
    std::string error;
    if (rank != 0) {
      try {
        group.barrier();
      } catch (const CollectiveTimeout& e) {
        error = e.what();
      } catch (const CollectiveAborted& e) {  // another rank's timeout arrived first
        error = e.what();
      }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!group.aborted() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    QVERIFY(group.aborted());
    if (rank == 0) return;
    QVERIFY2(error.find("collective barrier timed out") != std::string::npos, error.c_str());
    QVERIFY2(error.find(" ms on rank ") != std::string::npos, error.c_str());
    QVERIFY2(error.find("[host " + gMpi->host() + ", pid ") != std::string::npos, error.c_str());
  }

  void groupsAfterAnAbortWorkAgain() {
    // The groups the tests above aborted hold abandoned collectives; a new one is independent.
    auto group = MpiGroup::create(MPI_COMM_WORLD);
    at::Tensor t = at::ones({4});
    group->allReduceSum(t);
    QVERIFY(at::equal(t, at::full({4}, double(gMpi->size()))));
  }

  void outcomeAgreementNamesTheRootCause() {
    MpiRankProcess process(*gMpi);
    QCOMPARE(process.hosts().size(), size_t(gMpi->size()));
    const int rank = gMpi->rank();
    const std::string none = process.agreeOnOutcome("", false);
    const std::string failed = process.agreeOnOutcome(rank == 1   ? "out of memory"
                                                      : rank == 0 ? "collective aborted: rank 1"
                                                                  : "",
                                                      rank == 0);
    QCOMPARE(none, std::string());
    QCOMPARE(failed, "rank 1 (host " + process.hosts()[1] + "): out of memory");
  }

  void rankProcessGroupsAreCpuMpi() {
    MpiRankProcess process(*gMpi);
    QCOMPARE(process.backendName(at::Device(at::kCPU)), std::string("mpi"));
    auto group = process.makeGroup(at::Device(at::kCPU), {std::chrono::seconds(30)});
    QCOMPARE(group->rank(), gMpi->rank());
    QCOMPARE(group->options().timeout, std::chrono::milliseconds(30000));
    at::Tensor t = at::full({2}, double(gMpi->rank()));
    group->allReduceSum(t);
    const int n = gMpi->size();
    QVERIFY(at::equal(t, at::full({2}, double(n * (n - 1) / 2))));
  }
};

int main(int argc, char** argv) {
  MpiRuntime mpi(&argc, &argv);
  gMpi = &mpi;
  TestMpiGroup test;
  // Each process writes its own log: ranks' interleaved lines would be unreadable.
  const int failed = QTest::qExec(&test, argc, argv);
  int anyFailed = 0;
  MPI_Allreduce(&failed, &anyFailed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return anyFailed ? 1 : 0;
}

#include "tst_mpi_group.moc"
