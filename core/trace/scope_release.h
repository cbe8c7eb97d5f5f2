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
// tensors, on the GPU too, for the rest of a GUI session. releaseScope empties every scope, list,
// dict, object and function reachable from `scope`, so that each is freed when its last outside
// reference goes, except what is also reachable from `kept` (scopes that outlive the run, such as
// the builtins with the torch namespace). Call it only when nothing else will read `scope`'s
// values. It walks with a work list, so a value nested 100000 levels deep is safe.
void releaseScope(const std::shared_ptr<Environment>& scope,
                  const std::vector<const Environment*>& kept);

// Frees the lists, tuples, dicts and dict views that only `roots` reach, cycles among them
// included (a list made in a block that holds itself), and leaves whole any container something
// else still holds (a saved dict handed to the driver) with all it reaches. References are
// counted as CPython's collector counts them: a container is held from outside when its count
// exceeds the references from `roots` and from the other containers found. The caller hands over
// its references in `roots`; other values (tensors, functions) go with their last reference. It
// reads the containers it reaches while it counts: a driver's list that a block reached through
// a driver function is read by every rank, which is safe unless some rank's block writes it then
// (a script whose ranks write one driver list races already).
void releaseContainers(std::vector<Value> roots);

}  // namespace shardscope::trace
