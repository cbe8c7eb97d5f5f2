// All-reduce latency at tp = 2 (issue 15, target 2): NCCL, NCCL on symmetric windows and the
// peer-memory all-reduce, one rank thread per GPU, each measured in the same call:
//   eager   one call then a host wait for it, as an eagerly run layer does (median of 200);
//   graph   72 calls recorded in one CUDA graph, as a decode step's graph holds them (median
//           replay time of 50 / 72).
// The physical floor of a call is the bytes each rank must read from its peer over the
// measured peer-copy bandwidth; at decode sizes latency, not bandwidth, is the limit, so the
// report prints each figure against NCCL's, the peer run in the same call.
//   all_reduce_bench [--sizes 8192,131072,524288] > all_reduce.json
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/version.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "core/engine/capture_stream.h"
#include "core/parallel/nccl_group.h"

using namespace shardscope;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int kGraphCalls = 72;  // a Qwen3-8B decode step: 36 layers, two all-reduces each

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void onRanks(std::vector<std::unique_ptr<NcclGroup>>& groups,
             const std::function<void(int, NcclGroup&)>& fn) {
  std::vector<std::thread> threads;
  std::vector<std::string> errors(groups.size());
  for (size_t r = 0; r < groups.size(); ++r) {
    threads.emplace_back([&, r] {
      try {
        c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(r));
        fn(int(r), *groups[r]);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& e : errors) {
    if (!e.empty()) throw std::runtime_error(e);
  }
}

// Rank 0's medians in microseconds: {eager, graph}.
std::pair<double, double> measure(AllReduceAlgorithm algorithm, int64_t bytes) {
  auto groups = NcclGroup::create(2, algorithm);
  double eager = 0, graph = 0;
  onRanks(groups, [&](int rank, NcclGroup& g) {
    const auto opts = at::TensorOptions().dtype(at::kBFloat16).device(at::kCUDA, rank);
    at::Tensor t = at::randn({bytes / 2}, opts);
    std::vector<double> times;
    for (int i = 0; i < 220; ++i) {
      g.barrier();
      const auto start = Clock::now();
      g.allReduceSum(t);  // waits for the result, as an eager layer's collective does
      if (i >= 20)
        times.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
      t.div_(2);  // keep values bounded
    }
    std::vector<at::Tensor> buffers;
    for (int i = 0; i < kGraphCalls; ++i) buffers.push_back(at::randn({bytes / 2}, opts));
    at::cuda::CUDAGraph cg;
    // Every capture of a device on one stream (capture_stream.h says why).
    const CaptureStream capture{c10::DeviceIndex(rank)};
    {
      c10::cuda::CUDAStreamGuard guard(capture.stream());
      g.barrier();
#if TORCH_VERSION_MAJOR >= 2
      cg.capture_begin({0, 0}, cudaStreamCaptureModeThreadLocal);
#else
      cg.capture_begin();
#endif
      for (auto& b : buffers) g.allReduceSum(b);
      cg.capture_end();
    }
    std::vector<double> replays;
    for (int i = 0; i < 60; ++i) {
      g.barrier();
      const auto start = Clock::now();
      cg.replay();
      g.waitForStream("replayed graph");
      if (i >= 10)
        replays.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count() /
                          kGraphCalls);
    }
    if (rank == 0) {
      eager = median(times);
      graph = median(replays);
    }
  });
  return {eager, graph};
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int64_t> sizes{8192, 131072, 524288};
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--sizes") {
      sizes.clear();
      std::stringstream list(argv[i + 1]);
      for (std::string s; std::getline(list, s, ',');) sizes.push_back(std::stoll(s));
    }
  }
  if (at::cuda::device_count() < 2) {
    std::fprintf(stderr, "all_reduce_bench needs two GPUs\n");
    return 2;
  }
  json out = json::array();
  const AllReduceAlgorithm algorithms[] = {
      AllReduceAlgorithm::Nccl, AllReduceAlgorithm::NcclSymmetric, AllReduceAlgorithm::Peer};
  std::printf("%-16s %10s %12s %12s %12s %12s\n", "all-reduce", "bytes", "eager us", "x nccl",
              "graph us", "x nccl");
  for (int64_t bytes : sizes) {
    double ncclEager = 0, ncclGraph = 0;
    for (AllReduceAlgorithm a : algorithms) {
      json row{{"algorithm", toString(a)}, {"bytes", bytes}};
      try {
        const auto [eager, graph] = measure(a, bytes);
        if (a == AllReduceAlgorithm::Nccl) ncclEager = eager, ncclGraph = graph;
        row["eager_us"] = eager;
        row["graph_us"] = graph;
        std::printf("%-16s %10lld %12.2f %12.2f %12.2f %12.2f\n", toString(a), (long long)bytes,
                    eager, eager / ncclEager, graph, graph / ncclGraph);
      } catch (const std::exception& e) {
        row["error"] = e.what();
        std::printf("%-16s %10lld  failed: %s\n", toString(a), (long long)bytes, e.what());
      }
      std::fflush(stdout);
      out.push_back(row);
    }
  }
  std::fprintf(stderr, "%s\n", out.dump(1).c_str());
  return 0;
}
