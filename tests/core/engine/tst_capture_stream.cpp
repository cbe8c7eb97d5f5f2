// CaptureStream's leases (built only with LibTorch's CUDA; skips without a GPU): a rank that
// records again, after its graphs were dropped, records on the stream it used before; ranks
// holding leases at once on one device get distinct streams; a device's streams are its own; and
// the comparison switch SHARDSCOPE_CAPTURE_STREAM=pool gives a new stream each capture.
#include <ATen/cuda/CUDAContext.h>
#include <QtTest>

#include <barrier>
#include <set>
#include <thread>
#include <vector>

#include "common/scoped_switch.h"
#include "core/engine/capture_stream.h"

using namespace shardscope;

class TestCaptureStream : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void init() {
    if (at::cuda::device_count() == 0) QSKIP("needs a CUDA device");
  }

  void aReleasedLeaseComesBackAsTheSameStream() {
    c10::cuda::CUDAStream first = c10::cuda::getDefaultCUDAStream(0);
    {
      const CaptureStream lease(0);
      QCOMPARE(lease.index(), size_t(0));
      first = lease.stream();
      QVERIFY(first != c10::cuda::getDefaultCUDAStream(0));  // capture needs a side stream
    }
    for (int i = 0; i < 3; ++i) {  // as a rank's graphs are dropped and recorded again
      const CaptureStream again(0);
      QCOMPARE(again.index(), size_t(0));
      QVERIFY(again.stream() == first);
    }
  }

  void leasesHeldAtOnceAreDistinct() {
    const CaptureStream a(0), b(0);
    QCOMPARE(a.index(), size_t(0));
    QCOMPARE(b.index(), size_t(1));
    QVERIFY(a.stream() != b.stream());
    {
      const CaptureStream c(0);
      QCOMPARE(c.index(), size_t(2));
    }
    const CaptureStream d(0);  // the freed third, not a fourth
    QCOMPARE(d.index(), size_t(2));
  }

  void rankThreadsLeaseConcurrently() {
    constexpr int kThreads = 8;
    std::vector<c10::StreamId> ids(kThreads);
    std::barrier allHeld(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        const CaptureStream lease(0);
        ids[size_t(t)] = lease.stream().id();
        allHeld.arrive_and_wait();  // every lease is held before any is returned
      });
    }
    for (std::thread& t : threads) t.join();
    QCOMPARE(std::set<c10::StreamId>(ids.begin(), ids.end()).size(), size_t(kThreads));
    const CaptureStream after(0);
    QCOMPARE(after.index(), size_t(0));
  }

  void thePoolSwitchGivesANewStreamEachCapture() {
    const CaptureStream lease(0);
    c10::cuda::CUDAStream a = lease.stream(), b = a;
    {
      const test::ScopedSwitch pool("SHARDSCOPE_CAPTURE_STREAM", "pool");
      a = lease.stream();
      b = lease.stream();
    }
    QVERIFY(a != b);
    QVERIFY(a != lease.stream());
    QVERIFY(lease.stream() == lease.stream());
  }

  void eachDeviceHasItsOwn() {
    if (at::cuda::device_count() < 2) QSKIP("needs two CUDA devices");
    const CaptureStream on0(0), on1(1);
    QCOMPARE(on0.index(), size_t(0));
    QCOMPARE(on1.index(), size_t(0));
    QCOMPARE(on1.stream().device_index(), c10::DeviceIndex(1));
  }
};

QTEST_GUILESS_MAIN(TestCaptureStream)
#include "tst_capture_stream.moc"
