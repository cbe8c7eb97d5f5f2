// The methods of str in trace scripts: Python's, on the string's bytes (str_methods.cpp lists
// them; docs/trace-language.md too).
#pragma once

#include <string>

#include "value.h"

namespace shardscope::trace {

// `receiver.name` for a str receiver: the method bound to its text, or null when str has no such
// method here.
Value strMethodOf(const Value& receiver, const std::string& name);

}  // namespace shardscope::trace
