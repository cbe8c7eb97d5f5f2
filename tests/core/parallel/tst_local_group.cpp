// LocalGroup: collectives between rank threads. Each rank contributes different data
// (arange * (rank + 1)) so a wrong order or a missing rank fails.
#include <QtTest>

#include <thread>

#include "common/run_ranks.h"
#include "core/error.h"
#include "core/parallel/local_group.h"

using namespace shardscope;

namespace {

using test::runRanks;

// Runs fn(rank, group) on `size` threads; returns the first exception message, if any.
at::Tensor rankData(int rank) {
  return (at::arange(6, at::kFloat) * (rank + 1)).view({2, 3});
}

}  // namespace

class TestLocalGroup : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void allGather_data() {
    QTest::addColumn<int>("size");
    QTest::addColumn<int>("dim");
    for (int size : {1, 2, 4}) {
      for (int dim : {0, 1, -1}) QTest::addRow("size%d_dim%d", size, dim) << size << dim;
    }
  }
  void allGather() {
    QFETCH(int, size);
    QFETCH(int, dim);
    std::vector<at::Tensor> results(size);
    const auto errors =
        runRanks(size, [&](int r, ProcessGroup& g) { results[r] = g.allGather(rankData(r), dim); });
    std::vector<at::Tensor> parts;
    for (int r = 0; r < size; ++r) parts.push_back(rankData(r));
    const at::Tensor expected = at::cat(parts, dim);
    for (int r = 0; r < size; ++r) {
      QVERIFY2(errors[r].empty(), errors[r].c_str());
      QVERIFY(at::equal(results[r], expected));
    }
  }

  void allReduceSumIsIdenticalOnEveryRank_data() {
    QTest::addColumn<int>("size");
    QTest::newRow("1") << 1;
    QTest::newRow("2") << 2;
    QTest::newRow("4") << 4;
  }
  void allReduceSumIsIdenticalOnEveryRank() {
    QFETCH(int, size);
    std::vector<at::Tensor> results(size);
    runRanks(size, [&](int r, ProcessGroup& g) {
      at::Tensor t = rankData(r).clone();
      g.allReduceSum(t);
      results[r] = t;
    });
    const at::Tensor expected = at::arange(6, at::kFloat).view({2, 3}) * (size * (size + 1) / 2);
    for (int r = 0; r < size; ++r) QVERIFY(at::equal(results[r], expected));
  }

  void broadcastFromEveryRoot() {
    for (int root = 0; root < 4; ++root) {
      std::vector<at::Tensor> results(4);
      runRanks(4, [&](int r, ProcessGroup& g) {
        at::Tensor t = rankData(r).clone();
        g.broadcast(t, root);
        results[r] = t;
      });
      for (int r = 0; r < 4; ++r) QVERIFY(at::equal(results[r], rankData(root)));
    }
  }

  void abortWakesRanksWaitingInACollective() {
    const auto errors = runRanks(3, [](int r, ProcessGroup& g) {
      if (r == 2) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        g.abort("rank 2 failed: injected");
        return;
      }
      at::Tensor t = rankData(r);
      g.allReduceSum(t);
    });
    QVERIFY(errors[0].find("rank 2 failed: injected") != std::string::npos);
    QVERIFY(errors[1].find("rank 2 failed: injected") != std::string::npos);
  }

  void timeoutNamesTheCollective() {
    const auto errors = runRanks(2, [](int r, ProcessGroup& g) {
      g.setOptions({std::chrono::milliseconds(100)});
      if (r == 0) g.barrier();  // rank 1 never comes
    });
    QVERIFY2(errors[0].find("timed out") != std::string::npos, errors[0].c_str());
    QVERIFY(errors[0].find("barrier") != std::string::npos);
    // The watchdog says what every rank was doing.
    QVERIFY2(errors[0].find("rank 0: waiting in barrier #1") != std::string::npos,
             errors[0].c_str());
    QVERIFY2(errors[0].find("rank 1: has made no collective") != std::string::npos,
             errors[0].c_str());
  }

  void resetMakesTheGroupUsableAgain() {
    auto groups = LocalGroup::create(2);
    groups[0]->abort("first job failed");
    QVERIFY_THROWS_EXCEPTION(CollectiveAborted, groups[0]->barrier());
    groups[0]->reset();
    std::vector<at::Tensor> results(2);
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r) {
      threads.emplace_back([&, r] { results[r] = groups[r]->allGather(rankData(r), 0); });
    }
    for (auto& t : threads) t.join();
    QCOMPARE(results[1].size(0), 4);
  }
};

QTEST_GUILESS_MAIN(TestLocalGroup)
#include "tst_local_group.moc"
