#include "build_info.h"

#include <ATen/ATen.h>
#include <torch/version.h>

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
  return b;
}

}  // namespace shardscope
