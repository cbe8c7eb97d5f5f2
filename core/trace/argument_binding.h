// How a call's arguments fill a script function's parameters, as Python binds them: positional
// ones in order (the rest into *args), keywords by name (the rest into **kwargs), then defaults;
// and Python's TypeErrors where they do not fit.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "value.h"

namespace shardscope::trace {

// Each parameter of `f` with its value, in the order f declares them. Throws RuntimeFailure with
// Python's message ("f() missing 1 required positional argument: 'a'", ...).
std::vector<std::pair<std::string, Value>> bindArguments(const FunctionDef& f,
                                                         const CallArgs& args);

}  // namespace shardscope::trace
