#include "all_reduce_algorithm.h"

#include <cstdlib>
#include <cstring>
#include <string>

#include "../error.h"

namespace shardscope {

AllReduceAlgorithm allReduceAlgorithmFromEnvironment() {
  const char* v = std::getenv("SHARDSCOPE_ALL_REDUCE");
  if (!v || !*v || std::strcmp(v, "auto") == 0) return AllReduceAlgorithm::Auto;
  if (std::strcmp(v, "peer") == 0) return AllReduceAlgorithm::Peer;
  if (std::strcmp(v, "nccl") == 0) return AllReduceAlgorithm::Nccl;
  if (std::strcmp(v, "nccl-symmetric") == 0) return AllReduceAlgorithm::NcclSymmetric;
  throw Error(std::string("SHARDSCOPE_ALL_REDUCE=") + v +
              " is not an all-reduce; use auto (the default), peer, nccl or nccl-symmetric");
}

const char* toString(AllReduceAlgorithm a) {
  switch (a) {
    case AllReduceAlgorithm::Auto:
      return "auto";
    case AllReduceAlgorithm::Peer:
      return "peer";
    case AllReduceAlgorithm::Nccl:
      return "nccl";
    case AllReduceAlgorithm::NcclSymmetric:
      return "nccl-symmetric";
  }
  return "?";
}

}  // namespace shardscope
