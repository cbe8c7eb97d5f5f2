// cpu_linear_bench: an LM head's linear layer on the CPU (151936 rows of fp32, the width of a
// small model's hidden state) through linearForward, for 1, 2 and 4 rows of x: its time against
// the floor (the weight read once at the copy bandwidth measured here: a copy of a tensor of the
// weight's size reads and writes it) and against LibTorch's matmul, which linearForward used for
// every row count before (bench/RESULTS.md, "CPU decode: one row through GEMV"). Median of 30.
//
//   cpu_linear_bench [--threads N]
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
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--threads") == 0) threads = std::stoi(argv[i + 1]);
  }
  at::set_num_threads(threads);
  c10::InferenceMode inference;
  constexpr int64_t kVocab = 151936;
  std::printf("cpu_linear_bench: [R, H] x [%lld, H]^T fp32, %d threads, median of 30\n",
              (long long)kVocab, threads);
  for (int64_t h : {32, 256, 1024}) {
    const at::Tensor w = at::randn({kVocab, h});
    at::Tensor copy = at::empty_like(w);
    const double copyUs = medianMicros([&] { return copy.copy_(w); });
    const double bytes = double(w.numel()) * 4;
    const double bandwidth = 2 * bytes / copyUs;  // bytes per microsecond, read and write
    const double floorUs = bytes / bandwidth;
    for (int64_t rows : {1, 2, 4}) {
      const at::Tensor x = at::randn({rows, h});
      const double ours = medianMicros([&] { return shardscope::linearForward(x, w); });
      const double peer = medianMicros([&] { return at::matmul(x, w.t()); });
      std::printf(
          "H %4lld, %lld row(s): %9.0f us, %.2fx the floor (%.0f us at %.1f GB/s); matmul %9.0f "
          "us, %.2fx it\n",
          (long long)h, (long long)rows, ours, ours / floorUs, floorUs, bandwidth / 1e3, peer,
          ours / peer);
    }
  }
  return 0;
}
