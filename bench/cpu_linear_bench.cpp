// cpu_linear_bench: an LM head's linear layer on the CPU (151936 rows of fp32, the width of a
// small model's hidden state) through linearForward, for 1 to 32 rows of x: its time against the
// floor and against LibTorch's matmul, which linearForward used for
// every row count before (bench/RESULTS.md, "CPU decode: one row through GEMV", and "CPU prefill
// and batches: a few rows"). The floor is the larger of two, both measured here: the weight read
// once at copy bandwidth (a copy of a tensor of the weight's size reads and writes it), and the
// multiply-adds at the rate of a large square matmul. Median of 30.
//
//   cpu_linear_bench [--threads N] [--hidden H]   (H: one width instead of 32, 256 and 1024)
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/model/layers/linear.h"
#include "median_micros.h"

using shardscope::bench::medianMicros;

int main(int argc, char** argv) {
  int threads = 2;
  std::vector<int64_t> widths = {32, 256, 1024};
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--threads") == 0) threads = std::stoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--hidden") == 0) widths = {std::stoll(argv[i + 1])};
  }
  at::set_num_threads(threads);
  c10::InferenceMode inference;
  constexpr int64_t kVocab = 151936;
  std::printf("cpu_linear_bench: [R, H] x [%lld, H]^T fp32, %d threads, median of 30\n",
              (long long)kVocab, threads);
  // The machine's matmul rate: a 2048-square fp32 product, median of 5.
  const at::Tensor a = at::randn({2048, 2048}), b = at::randn({2048, 2048});
  const double flopsPerUs =
      2.0 * 2048 * 2048 * 2048 / medianMicros([&] { return at::mm(a, b); }, 5);
  std::printf("matmul rate %.1f GFLOP/s\n", flopsPerUs / 1e3);
  for (int64_t h : widths) {
    const at::Tensor w = at::randn({kVocab, h});
    at::Tensor copy = at::empty_like(w);
    const double copyUs = medianMicros([&] { return copy.copy_(w); });
    const double bytes = double(w.numel()) * 4;
    const double bandwidth = 2 * bytes / copyUs;  // bytes per microsecond, read and write
    const double bytesUs = bytes / bandwidth;
    for (int64_t rows : {1, 2, 3, 4, 8, 16, 24, 32}) {
      const at::Tensor x = at::randn({rows, h});
      const double ours = medianMicros([&] { return shardscope::linearForward(x, w); });
      const double peer = medianMicros([&] { return at::matmul(x, w.t()); });
      const double computeUs = 2.0 * double(rows) * double(h) * double(kVocab) / flopsPerUs;
      const double floorUs = std::max(bytesUs, computeUs);
      std::printf(
          "H %4lld, %2lld row(s): %9.0f us, %.2fx the floor (%.0f us, %s; bytes at %.1f GB/s "
          "%.0f us); matmul %9.0f us, %.2fx it\n",
          (long long)h, (long long)rows, ours, ours / floorUs, floorUs,
          computeUs > bytesUs ? "compute" : "bytes", bandwidth / 1e3, bytesUs, peer, ours / peer);
    }
  }
  return 0;
}
