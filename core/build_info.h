// What this build of the core was made with, for About boxes and run records (no LibTorch here).
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
};

BuildInfo buildInfo();

}  // namespace shardscope
