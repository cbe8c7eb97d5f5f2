// What this build of the core was made with, for About boxes, --version and run records (no
// LibTorch here).
#pragma once

#include <string>

namespace shardscope {

struct BuildInfo {
  std::string shardscope;  // "0.1.0"
  std::string libtorch;    // "2.11.0" / "1.13.1"
  bool cuda = false;       // LibTorch has CUDA and a GPU is visible
  int gpus = 0;
  bool nccl = false;        // built with the NCCL process group
  std::string ncclVersion;  // "2.28.3" when built with NCCL
  bool openmp = false;      // core's CPU loops (at::parallel_for) run on OpenMP threads
};

BuildInfo buildInfo();

// How many threads core's at::parallel_for spreads a long loop over at the current intra-op
// thread count (at::get_num_threads): the check that `openmp` holds in practice (tst_engine).
// LibTorch's parallel_for is an OpenMP pragma in its header, so in a core compiled without OpenMP
// (a clang build) it is 1 whatever the count says.
int parallelForThreads();

}  // namespace shardscope
