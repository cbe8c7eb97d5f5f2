// LeaseRegistry, the rules behind CaptureStream's streams (tst_capture_stream checks them with
// CUDA streams on a GPU): a returned value is lent again before a new one is made, values held at
// once are distinct, keys are independent, rank threads lease concurrently, a moved lease returns
// its value once, and a lease outliving every other reference to its registry returns safely.
#include <QtTest>

#include <atomic>
#include <barrier>
#include <memory>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "core/engine/lease_registry.h"

using namespace shardscope;

namespace {

using Registry = LeaseRegistry<int, int>;

// Values 100, 101, ... in the order they are made, whatever their key; `made` counts them.
std::shared_ptr<Registry> counting(std::atomic<int>& made) {
  return Registry::create([&made](const int&) { return 100 + made++; });
}

}  // namespace

class TestLeaseRegistry : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void aReturnedValueIsLentAgain() {
    std::atomic<int> made = 0;
    const auto registry = counting(made);
    for (int i = 0; i < 3; ++i) {  // as a rank's graphs are dropped and recorded again
      const auto lease = registry->lease(0);
      QCOMPARE(lease.index(), size_t(0));
      QCOMPARE(lease.value(), 100);
    }
    QCOMPARE(made.load(), 1);
  }

  void valuesHeldAtOnceAreDistinct() {
    std::atomic<int> made = 0;
    const auto registry = counting(made);
    const auto a = registry->lease(0);
    const auto b = registry->lease(0);
    QCOMPARE(a.index(), size_t(0));
    QCOMPARE(b.index(), size_t(1));
    QVERIFY(a.value() != b.value());
    {
      const auto c = registry->lease(0);
      QCOMPARE(c.index(), size_t(2));
    }
    const auto d = registry->lease(0);  // the freed third, not a fourth
    QCOMPARE(d.index(), size_t(2));
    QCOMPARE(d.value(), 102);
    QCOMPARE(registry->size(0), size_t(3));
  }

  void keysHaveTheirOwnValues() {
    std::atomic<int> made = 0;
    const auto registry = counting(made);
    const auto a = registry->lease(0);
    const auto b = registry->lease(1);
    QCOMPARE(a.index(), size_t(0));
    QCOMPARE(b.index(), size_t(0));  // key 1's first, though key 0's is held
    QVERIFY(a.value() != b.value());
    QCOMPARE(registry->size(0), size_t(1));
    QCOMPARE(registry->size(1), size_t(1));
    QCOMPARE(registry->size(2), size_t(0));
  }

  void threadsLeaseConcurrently() {
    constexpr int kThreads = 8;
    std::atomic<int> made = 0;
    const auto registry = counting(made);
    std::vector<int> values(kThreads);
    std::barrier allHeld(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        const auto lease = registry->lease(0);
        values[size_t(t)] = lease.value();
        allHeld.arrive_and_wait();  // every lease is held before any is returned
      });
    }
    for (auto& t : threads) t.join();
    QCOMPARE(std::set<int>(values.begin(), values.end()).size(), size_t(kThreads));
    QCOMPARE(made.load(), kThreads);
    const auto again = registry->lease(0);  // all returned: the first comes back
    QCOMPARE(again.index(), size_t(0));
  }

  void aMovedLeaseReturnsItsValueOnce() {
    std::atomic<int> made = 0;
    const auto registry = counting(made);
    std::optional<Registry::Lease> holder;
    {
      auto lease = registry->lease(0);
      holder.emplace(std::move(lease));
    }  // the moved-from lease returns nothing
    const auto second = registry->lease(0);
    QCOMPARE(second.index(), size_t(1));  // the first is still held, by `holder`
    holder.reset();
    const auto third = registry->lease(0);
    QCOMPARE(third.index(), size_t(0));
  }

  void aLeaseKeepsItsRegistryAlive() {
    std::atomic<int> made = 0;
    auto registry = counting(made);
    std::weak_ptr<Registry> watch = registry;
    std::optional<Registry::Lease> lease;
    lease.emplace(registry->lease(7));
    registry.reset();  // as a static registry is destroyed at exit while an engine holds a lease
    QVERIFY(!watch.expired());
    QCOMPARE(lease->value(), 100);
    lease.reset();  // returned to a registry that is still there, which then goes
    QVERIFY(watch.expired());
  }
};

QTEST_MAIN(TestLeaseRegistry)
#include "tst_lease_registry.moc"
