#include "intra_op_threads.h"

#include <algorithm>

namespace shardscope {

int intraOpThreads(int requested, bool cpu, int64_t rankParameters, int cores, int ranks) {
  if (requested > 0) return requested;
  if (cpu && rankParameters <= kSmallRankParameters) return 1;
  return std::max(1, cores / std::max(1, ranks));
}

}  // namespace shardscope
