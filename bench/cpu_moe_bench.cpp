// cpu_moe_bench: one MoE layer's experts on the CPU through GroupedExperts, fp32, in
// Qwen3-30B-A3B's shape (128 experts, top 8, H 2048, I 768: 2.4 GB of expert weights) or a
// smaller one (--small: 64 experts, top 4, H 1024, I 512). Tokens routed at random (softmax of
// normal logits, top k). For T = 1, 4, 16 and 64 tokens: the expert-by-expert loop (the CPU's
// way) against the floor, the chosen experts' weights read once at the copy bandwidth measured
// here (a copy of a tensor reads and writes it), and against the padded batched matmuls (every
// expert's weights, chosen or not), which the CPU ran before. Median of --repeats (default 9).
//
//   cpu_moe_bench [--threads N] [--small] [--repeats N]
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "core/model/layers/grouped_experts.h"
#include "median_micros.h"

using shardscope::ExpertGemm;
using shardscope::bench::medianMicros;

constexpr const char* kUsage = "cpu_moe_bench [--threads N] [--small] [--repeats N]";

int main(int argc, char** argv) {
  int threads = 2, repeats = 9;
  bool small = false;
  for (int i = 1; i < argc; ++i) {
    const bool valued = i + 1 < argc;
    if (std::strcmp(argv[i], "--small") == 0) {
      small = true;
    } else if (valued && std::strcmp(argv[i], "--threads") == 0) {
      threads = std::stoi(argv[++i]);
    } else if (valued && std::strcmp(argv[i], "--repeats") == 0) {
      repeats = std::stoi(argv[++i]);
    } else {
      std::fprintf(stderr, "cpu_moe_bench: unknown option '%s'\nusage: %s\n", argv[i], kUsage);
      return 2;
    }
  }
  if (threads < 1 || repeats < 1) {
    std::fprintf(stderr, "cpu_moe_bench: --threads and --repeats take 1 or more\n");
    return 2;
  }
  at::set_num_threads(threads);
  c10::InferenceMode inference;
  at::manual_seed(1);
  const int64_t E = small ? 64 : 128, k = small ? 4 : 8, H = small ? 1024 : 2048,
                I = small ? 512 : 768;
  const at::Tensor w13 = at::randn({E, 2 * I, H}) * 0.02, w2 = at::randn({E, H, I}) * 0.02;
  const double expertBytes = double(3 * H * I) * 4;
  at::Tensor copy = at::empty_like(w2);
  const double copyUs = medianMicros([&] { return copy.copy_(w2); }, repeats);
  const double bandwidth = 2 * double(w2.numel()) * 4 / copyUs;  // bytes per microsecond
  std::printf(
      "cpu_moe_bench: %lld experts top %lld, H %lld, I %lld fp32 (%.2f GB), %d threads, copy "
      "%.1f GB/s, median of %d\n",
      (long long)E, (long long)k, (long long)H, (long long)I, expertBytes * double(E) / 1e9,
      threads, bandwidth / 1e3, repeats);
  for (int64_t T : {1, 4, 16, 64}) {
    const at::Tensor x = at::randn({T, H});
    auto [w, ids] = at::softmax(at::randn({T, E}), -1).topk(k, -1);
    w = w / w.sum(-1, true);
    const int64_t chosen = std::get<0>(at::_unique(ids)).numel();
    const double floorUs = double(chosen) * expertBytes / bandwidth;
    const auto run = [&](ExpertGemm gemm) {
      return medianMicros(
          [&] { return shardscope::groupedExperts(x, w, ids, w13, w2, 0, E, gemm); }, repeats);
    };
    const double ours = run(ExpertGemm::ExpertByExpert), padded = run(ExpertGemm::Padded);
    std::printf(
        "T %3lld (%3lld experts chosen): %9.0f us, %.2fx the floor (%.0f us); padded %9.0f us, "
        "%.3fx it\n",
        (long long)T, (long long)chosen, ours, ours / floorUs, floorUs, padded, ours / padded);
  }
  return 0;
}
