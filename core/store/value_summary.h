// Statistics of a tensor kept in the session log in place of values too large to store.
#pragma once

#include "../host_tensor.h"
#include "../trace/trace_record.h"

namespace shardscope::store {

// min, max, mean and L2 norm over the finite elements; the others are counted.
trace::ValueSummary summarize(const HostTensor& t);

}  // namespace shardscope::store
