// The names a block may look up in its scope, found from its syntax tree: every name it reads,
// assigns or imports, in nested statements, functions and lambdas too. A trace copies to its ranks
// only the driver's names in this set (an over-approximation: a name it only assigns costs a copy,
// a name it never mentions costs nothing, however large its value).
#pragma once

#include <set>
#include <string>

#include "ast.h"

namespace shardscope::trace {

struct FunctionDef;

// Adds to `out` every name `block` mentions (see above).
void addNamesMentioned(const Block& block, std::set<std::string>& out);
// The names function `f` may read from the scope it closes over (a driver function a block
// calls): those its body mentions, less its parameters, which every call binds. A name its body
// assigns still counts: here a function reads the outer name until its own assignment runs
// (`x = x + 1`, `log += [v]`), and an import reads the interpreter's globals.
void addFreeNames(const FunctionDef& f, std::set<std::string>& out);

}  // namespace shardscope::trace
