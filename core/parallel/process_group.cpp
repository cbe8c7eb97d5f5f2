#include "process_group.h"

#include "../error.h"

namespace shardscope {

void ProcessGroup::throwIfAborted() const {
  if (aborted()) throw CollectiveAborted("collective aborted: " + abortReason());
}

}  // namespace shardscope
