// The CUDA kernels a piece of work runs, with their start and end on the GPU, recorded through
// LibTorch's Kineto profiler (CUPTI: kernels replayed from CUDA graphs are recorded one by one)
// and saved as a Chrome trace; bench/report_timeline.py sums it per kernel and per gap. This is
// how a decode step's time is placed on a machine where Nsight Systems does not run.
#pragma once

#include <torch/csrc/autograd/profiler_kineto.h>

#include <set>
#include <string>

namespace shardscope::bench {

template <typename Work>
void recordKernelTimeline(const std::string& path, Work&& work) {
  namespace impl = torch::profiler::impl;
  const impl::ProfilerConfig config(impl::ProfilerState::KINETO);
  const std::set<impl::ActivityType> activities{impl::ActivityType::CUDA};
  torch::autograd::profiler::prepareProfiler(config, activities);
  torch::autograd::profiler::enableProfiler(config, activities);
  try {
    work();
  } catch (...) {
    torch::autograd::profiler::disableProfiler();  // the profiler must not outlive a failure
    throw;
  }
  torch::autograd::profiler::disableProfiler()->save(path);
}

}  // namespace shardscope::bench
