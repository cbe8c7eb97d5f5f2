// str.format(*args, **kwargs) in trace scripts: fields {}, {0}, {name}, each with !r / !s / !a and
// a :spec as an f-string field formats them, a spec with fields of its own ("{:>{}}", one level
// deep, as Python's); {{ and }} are braces.
#pragma once

#include <string>

#include "value.h"

namespace shardscope::trace {

// `s.format(*a.positional, **a.keywords)`; throws RuntimeFailure with Python's messages.
Value formatText(const std::string& s, CallArgs& a);

}  // namespace shardscope::trace
