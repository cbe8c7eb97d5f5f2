#include "build_info.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/version.h>

#include <atomic>
#include <bitset>
#include <cstdint>

#ifdef SHARDSCOPE_WITH_NCCL
#include <nccl.h>
#endif

namespace shardscope {

BuildInfo buildInfo() {
  BuildInfo b;
  b.shardscope = SHARDSCOPE_VERSION;
  b.libtorch = TORCH_VERSION;
  b.cuda = at::hasCUDA();
  b.gpus = b.cuda ? int(at::detail::getCUDAHooks().getNumGPUs()) : 0;
#ifdef SHARDSCOPE_WITH_NCCL
  b.nccl = true;
  b.ncclVersion = std::to_string(NCCL_MAJOR) + "." + std::to_string(NCCL_MINOR) + "." +
                  std::to_string(NCCL_PATCH);
#endif
#ifdef _OPENMP
  b.openmp = true;
#endif
  return b;
}

int parallelForThreads() {
  std::atomic<uint64_t> seen{0};
  at::parallel_for(0, int64_t(1) << 16, 1, [&](int64_t, int64_t) {
    seen.fetch_or(uint64_t(1) << (at::get_thread_num() % 64));
  });
  return int(std::bitset<64>(seen.load()).count());  // core is also built as C++17 (fuzzing)
}

}  // namespace shardscope
