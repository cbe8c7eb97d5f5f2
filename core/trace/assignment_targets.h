// Which expressions may be assigned to or deleted, and what Python's syntax errors call the rest.
#pragma once

#include <string>

#include "ast.h"

namespace shardscope::trace {

// The first part of `e`, in source order, that cannot be assigned to (or, `deleting`, deleted), or
// null. Targets are names, attributes and subscripts, and tuples and lists of them; one assigned
// to may hold starred targets (`first, *rest`).
const Expr* firstNonTarget(const Expr& e, bool deleting);

// The tuple or list in target `e` that holds two starred targets (`a, *b, *c`), or null.
const Expr* secondStarred(const Expr& e);

// Where `e`'s text begins (an operator's node stands at the operator, a call's at its '(').
SourceLocation startOf(const Expr& e);

// Python's name for an expression in "cannot assign to ..." and "'...' is an illegal expression
// for augmented assignment": "function call", "literal", "list comprehension", "tuple"...
std::string pythonKindName(const Expr& e);

}  // namespace shardscope::trace
