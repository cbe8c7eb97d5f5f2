// medianMicros: the median wall time of `repeats` calls of f, in microseconds, for the CPU
// benchmarks (cpu_linear_bench, cpu_moe_bench). f returns its result so nothing is optimised away.
#pragma once

#include <algorithm>
#include <chrono>
#include <vector>

namespace shardscope::bench {

// repeats must be at least 1.
template <typename F>
double medianMicros(F&& f, int repeats = 30) {
  std::vector<double> t;
  repeats = std::max(repeats, 1);
  for (int i = 0; i < repeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    const auto result = f();
    (void)result;
    t.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
                    .count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace shardscope::bench
