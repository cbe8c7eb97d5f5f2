// How a saved value of one run compares with the same value of another (a replay).
#pragma once

#include <string>

#include "../trace/trace_record.h"

namespace shardscope::store {

struct ValueDiff {
  bool identical = false;  // same dtype, shape and bytes (or the same repr)
  bool comparable = true;  // false when dtype/shape/kind differ: `detail` says how
  double maxAbs = 0;       // max |after - before|
  double relative = 0;     // maxAbs / max |before| (0 when both are zero)
  std::string detail;      // one line for people
};

ValueDiff compareValues(const trace::SavedValue& before, const trace::SavedValue& after);

}  // namespace shardscope::store
