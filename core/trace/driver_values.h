// How values cross between a script's driver and its ranks: each rank's own copies of the driver
// names a block uses, and saved values as plain data for the run's record.
#pragma once

#include <string>
#include <vector>

#include "interleaver.h"
#include "trace_record.h"
#include "value.h"

namespace shardscope::trace {

// The invokes with one rank's copies of their captured values (tensors on the rank's device). A
// value reached twice (a list under two names, a list that holds itself) is copied once, so the
// copies alias as the originals do. The copies are held only by the result, so that the block
// that takes them frees them when it ends, cycles included.
std::vector<InvokeSpec> rankCopies(std::vector<InvokeSpec> invokes);

// Appends saved value `v` as plain data: tensors keep their dtype; tuples and lists of tensors
// become one entry per item (`name[i]`); anything else is kept as its repr.
void appendSaved(const std::string& name, const Value& v, std::vector<SavedValue>& out);

}  // namespace shardscope::trace
