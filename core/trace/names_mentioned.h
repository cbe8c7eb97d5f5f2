// The names a block may look up in its scope, found from its syntax tree: every name it reads,
// assigns or imports, in nested statements, functions and lambdas too. A trace copies to its ranks
// only the driver's names in this set (an over-approximation: a name it only assigns costs a copy,
// a name it never mentions costs nothing, however large its value).
#pragma once

#include <set>
#include <string>

#include "ast.h"

namespace shardscope::trace {

// Adds to `out` every name `block` mentions (see above).
void addNamesMentioned(const Block& block, std::set<std::string>& out);
// The same for an expression (a lambda's body).
void addNamesMentioned(const ExprPtr& expression, std::set<std::string>& out);

}  // namespace shardscope::trace
