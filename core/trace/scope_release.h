// Frees what a finished run's scope held, reference cycles included.
#pragma once

#include <memory>
#include <vector>

#include "value.h"

namespace shardscope::trace {

class Environment;

// Values are counted references, so a cycle is never freed by its counts: a function defined at
// global scope (its closure is the globals, which hold it), an inner function its own call's
// scope holds, a list appended to itself. A runner that kept each run's cycles would keep their
// tensors, on the GPU too, for the rest of a GUI session. releaseScopes empties every scope, list,
// dict, object and function reachable from `scopes` (a run's globals, and the call scopes it made
// functions in: an inner function that only its call's scope holds is reachable from no global),
// so that each is freed when its last outside reference goes, except what is also reachable from
// `kept` (scopes that outlive the run, such as the builtins with the torch namespace). Call it only
// when nothing else will read those values. It walks with a work list, so a value nested 100000
// levels deep is safe.
void releaseScopes(const std::vector<std::shared_ptr<Environment>>& scopes,
                   const std::vector<const Environment*>& kept);

// Frees what only `roots` and `scopes` reach, cycles among them included (a list made in a block
// that holds itself; an inner function its call's scope holds, the call long over), and leaves
// whole anything something else still holds (a driver's list, a function a driver's list keeps)
// with all it reaches. References are counted as CPython's collector counts them: a value,
// function or handed scope is held from outside when its count exceeds the references from the
// roots, the scopes and the others found. A scope not in `scopes` (a driver's globals, the
// builtins) is never entered nor emptied, and neither is a function made in one (a driver's
// function: what its defaults hold counts as held from outside). A bound method holds its list or
// dict in its items and is counted through them; a value another builtin captured (a module's
// `.whole` holds the block's mediator) counts as held from outside, so a cycle through one stays.
// Roots may be values no scope reaches any more (Interpreter::cycleCandidates). The caller
// hands over its references; tensors and other values without values in them go with their last
// reference. It reads what it reaches while it counts: of the driver's values a block reaches only
// those no block writes (rankCopies copies the rest), so other ranks' blocks may run meanwhile.
void releaseCycles(std::vector<Value> roots, std::vector<std::shared_ptr<Environment>> scopes);

}  // namespace shardscope::trace
