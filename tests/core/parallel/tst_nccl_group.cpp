// NcclGroup's all-reduce implementations on two GPUs, one rank thread each (built only with the
// fused CUDA kernels; skips with fewer than two GPUs): the peer-memory all-reduce and NCCL on
// symmetric windows give exactly NCCL's sums on random data, eagerly and replayed from CUDA
// graphs, in fp32, bf16 and fp16, for sizes on both sides of the peer buffer's limit; and a rank
// that never arrives makes the other's peer all-reduce end with the watchdog's timeout (the
// kernel returns on the abort), not hang.
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/version.h>
#include <QtTest>

#include <chrono>
#include <functional>
#include <thread>

#include "core/error.h"
#include "core/parallel/nccl_group.h"

using namespace shardscope;

namespace {

int gpus() {
  return int(at::cuda::device_count());
}

// Runs fn(rank, group) on one thread per rank with the rank's GPU current; returns the errors.
std::vector<std::string> onRanks(std::vector<std::unique_ptr<NcclGroup>>& groups,
                                 const std::function<void(int, NcclGroup&)>& fn) {
  std::vector<std::string> errors(groups.size());
  std::vector<std::thread> threads;
  for (size_t r = 0; r < groups.size(); ++r) {
    threads.emplace_back([&, r] {
      try {
        c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(r));
        fn(int(r), *groups[r]);
        at::cuda::getCurrentCUDAStream().synchronize();
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

void expectNoErrors(const std::vector<std::string>& errors) {
  for (size_t r = 0; r < errors.size(); ++r)
    QVERIFY2(errors[r].empty(), ("rank " + std::to_string(r) + ": " + errors[r]).c_str());
}

// Rank r's input for case `c`: random, different per rank and case, from a generator of its own
// (the global seed is shared by the rank threads).
at::Tensor input(int rank, int c, int64_t numel, at::ScalarType dtype) {
  at::Generator gen = at::detail::createCPUGenerator(uint64_t(1000 * c + rank));
  return at::randn({numel}, gen, at::TensorOptions().dtype(at::kFloat))
      .to(at::TensorOptions().dtype(dtype).device(at::kCUDA, rank));
}

struct Case {
  int64_t numel;
  at::ScalarType dtype;
};

std::vector<Case> cases() {
  std::vector<Case> all;
  for (auto t : {at::kFloat, at::kBFloat16, at::kHalf}) {
    // one vector, a decode row, 16 rows, the limit exactly, past the limit (NCCL takes it)
    const int64_t perVector = 16 / int64_t(c10::elementSize(t));
    const int64_t limit = int64_t(NcclGroup::kSmallAllReduceBytes / c10::elementSize(t));
    for (int64_t n : {perVector, int64_t(4096), int64_t(16 * 4096), limit, 2 * limit + 8})
      all.push_back({n, t});
  }
  all.push_back({7, at::kBFloat16});  // not whole vectors: NCCL takes it
  return all;
}

// Each rank's sums for every case, eagerly, with `algorithm`.
std::vector<std::vector<at::Tensor>> eagerSums(AllReduceAlgorithm algorithm, int size) {
  auto groups = NcclGroup::create(size, algorithm);
  std::vector<std::vector<at::Tensor>> sums(static_cast<size_t>(size));
  expectNoErrors(onRanks(groups, [&](int rank, NcclGroup& g) {
    const auto all = cases();
    for (size_t c = 0; c < all.size(); ++c) {
      at::Tensor t = input(rank, int(c), all[c].numel, all[c].dtype);
      g.allReduceSum(t);
      sums[size_t(rank)].push_back(t.cpu());
    }
  }));
  return sums;
}

}  // namespace

class TestNcclGroup : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void initTestCase() {
    if (gpus() < 2) QSKIP("needs two GPUs (one per rank)");
  }

  void peerAndSymmetricSumsEqualNcclsExactly() {
    const auto nccl = eagerSums(AllReduceAlgorithm::Nccl, 2);
    const auto peer = eagerSums(AllReduceAlgorithm::Peer, 2);
    const auto symmetric = eagerSums(AllReduceAlgorithm::NcclSymmetric, 2);
    const auto all = cases();
    for (size_t c = 0; c < all.size(); ++c) {
      const std::string what = std::to_string(all[c].numel) + " x " + c10::toString(all[c].dtype);
      QVERIFY2(at::equal(nccl[0][c], nccl[1][c]), ("NCCL ranks differ: " + what).c_str());
      for (int r = 0; r < 2; ++r) {
        QVERIFY2(at::equal(peer[size_t(r)][c], nccl[size_t(r)][c]),
                 ("peer differs from NCCL on rank " + std::to_string(r) + ": " + what).c_str());
        QVERIFY2(
            at::equal(symmetric[size_t(r)][c], nccl[size_t(r)][c]),
            ("symmetric differs from NCCL on rank " + std::to_string(r) + ": " + what).c_str());
      }
    }
  }

  void autoPicksPeerOnPeerGpus() {
    auto groups = NcclGroup::create(2, AllReduceAlgorithm::Auto);
    QCOMPARE(toString(groups[0]->allReduceAlgorithm()), toString(AllReduceAlgorithm::Peer));
  }

  // 24 all-reduces of a decode row recorded in one graph per rank, replayed three times with new
  // data: each replay's sums equal NCCL's eager sums of the same data.
  void peerInsideCudaGraphsEqualsNccl() {
    constexpr int kCalls = 24, kReplays = 3;
    const int64_t n = 4096;
    auto reference = [&](int replay) {
      auto groups = NcclGroup::create(2, AllReduceAlgorithm::Nccl);
      std::vector<std::vector<at::Tensor>> out(2);
      expectNoErrors(onRanks(groups, [&](int rank, NcclGroup& g) {
        for (int i = 0; i < kCalls; ++i) {
          at::Tensor t = input(rank, 100 * replay + i, n, at::kBFloat16);
          g.allReduceSum(t);
          out[size_t(rank)].push_back(t.cpu());
        }
      }));
      return out;
    };
    auto groups = NcclGroup::create(2, AllReduceAlgorithm::Peer);
    std::vector<std::vector<std::vector<at::Tensor>>> got(kReplays,
                                                          std::vector<std::vector<at::Tensor>>(2));
    expectNoErrors(onRanks(groups, [&](int rank, NcclGroup& g) {
      std::vector<at::Tensor> buffers;
      for (int i = 0; i < kCalls; ++i)
        buffers.push_back(
            at::zeros({n}, at::TensorOptions().dtype(at::kBFloat16).device(at::kCUDA, rank)));
      at::cuda::CUDAGraph graph;
      const c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool(false, rank);
      {
        c10::cuda::CUDAStreamGuard guard(side);
#if TORCH_VERSION_MAJOR >= 2
        graph.capture_begin({0, 0}, cudaStreamCaptureModeThreadLocal);
#else
        graph.capture_begin();
#endif
        for (auto& b : buffers) g.allReduceSum(b);
        graph.capture_end();
      }
      for (int replay = 0; replay < kReplays; ++replay) {
        for (int i = 0; i < kCalls; ++i)
          buffers[size_t(i)].copy_(input(rank, 100 * replay + i, n, at::kBFloat16));
        graph.replay();
        g.waitForStream("replayed graph");
        for (auto& b : buffers) got[size_t(replay)][size_t(rank)].push_back(b.cpu());
      }
    }));
    for (int replay = 0; replay < kReplays; ++replay) {
      const auto want = reference(replay);
      for (int r = 0; r < 2; ++r)
        for (int i = 0; i < kCalls; ++i)
          QVERIFY2(at::equal(got[size_t(replay)][size_t(r)][size_t(i)], want[size_t(r)][size_t(i)]),
                   ("replay " + std::to_string(replay) + " call " + std::to_string(i)).c_str());
    }
  }

  // Rank 1 never calls: rank 0's peer all-reduce spins until the watchdog aborts the group; the
  // abort flag ends the kernel, so the timeout arrives and the stream drains.
  void aRankThatNeverArrivesTimesOutInsteadOfHanging() {
    auto groups = NcclGroup::create(2, AllReduceAlgorithm::Peer);
    for (auto& g : groups) g->setOptions({std::chrono::milliseconds(1500)});
    const auto start = std::chrono::steady_clock::now();
    const auto errors = onRanks(groups, [&](int rank, NcclGroup& g) {
      if (rank == 1) return;
      at::Tensor t = input(0, 0, 4096, at::kBFloat16);
      g.allReduceSum(t);
    });
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    QVERIFY2(errors[0].find("timed out") != std::string::npos, errors[0].c_str());
    QVERIFY2(errors[1].empty(), errors[1].c_str());
    QVERIFY2(seconds < 10, std::to_string(seconds).c_str());
    QVERIFY(groups[0]->aborted());
  }
};

QTEST_GUILESS_MAIN(TestNcclGroup)
#include "tst_nccl_group.moc"
