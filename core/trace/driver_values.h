// How values cross between a script's driver and its ranks: each rank's own copies of the driver
// names a block uses, the saved values back to the driver on the host, and saved values as plain
// data for the run's record.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "interleaver.h"
#include "trace_record.h"
#include "value.h"

namespace shardscope::trace {

// The invokes with one rank's copies of their captured values (tensors on the rank's device). A
// value reached twice (a list under two names, a list that holds itself) is copied once, so the
// copies alias as the originals do. A function the driver made, in its global scope
// (InvokeSpec::driverScope) or in a call of one of its functions, is copied too, into the first
// invoke's blockFunctions, with the call scopes it closes over (blockScopes), for the Interleaver
// to put under the block's scope: so no block writes a driver value, and no two ranks one value.
// The copies are held only by the result, so that the block that takes them frees them when it
// ends, cycles included.
std::vector<InvokeSpec> rankCopies(std::vector<InvokeSpec> invokes);

// The blocks' saved values, by name, as the driver receives them: every device tensor they reach
// (through tuples, lists, dicts and dict views) copied to the host, in one transfer per device and
// dtype, with aliasing kept (a list under two names, a dict that holds itself).
std::map<std::string, Value> savedOnHost(const std::map<std::string, Value>& saved);

// Appends saved value `v` as plain data: tensors keep their dtype; tuples and lists of tensors
// become one entry per item (`name[i]`); anything else is kept as its repr.
void appendSaved(const std::string& name, const Value& v, std::vector<SavedValue>& out);

}  // namespace shardscope::trace
