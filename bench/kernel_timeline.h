// The CUDA kernels a piece of work runs, with their start and end on the GPU, recorded through
// LibTorch's Kineto profiler (CUPTI: kernels replayed from CUDA graphs are recorded one by one)
// and saved as a Chrome trace; bench/report_timeline.py sums it per kernel and per gap. This is
// how a decode step's time is placed on a machine where Nsight Systems does not run. With
// hostOps the host's ATen ops are recorded too, and the work sits inside a "unit" scope: what the
// host does before the first kernel and after the last.
#pragma once

#include <ATen/record_function.h>
#include <torch/csrc/autograd/profiler_kineto.h>

#include <set>
#include <string>

namespace shardscope::bench {

template <typename Work>
void recordKernelTimeline(const std::string& path, Work&& work, bool hostOps = false) {
  namespace impl = torch::profiler::impl;
  const impl::ProfilerConfig config(impl::ProfilerState::KINETO);
  std::set<impl::ActivityType> activities{impl::ActivityType::CUDA};
  if (hostOps) activities.insert(impl::ActivityType::CPU);
  torch::autograd::profiler::prepareProfiler(config, activities);
  torch::autograd::profiler::enableProfiler(config, activities);
  try {
    RECORD_USER_SCOPE("unit");
    work();
  } catch (...) {
    torch::autograd::profiler::disableProfiler();  // the profiler must not outlive a failure
    throw;
  }
  torch::autograd::profiler::disableProfiler()->save(path);
}

}  // namespace shardscope::bench
