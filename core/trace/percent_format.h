// printf-style string formatting, `text % values`, as Python's str.__mod__ does it: %s %r %a %d
// %i %u %o %x %X %e %E %f %F %g %G %c and %%, with flags (- + space # 0), a width and a precision
// (digits or *), and %(key)s from a dict. The conversions reuse format_spec's formatting.
#pragma once

#include <string>

#include "value.h"

namespace shardscope::trace {

// `format % args`. Throws RuntimeFailure with Python's message where they do not fit ("not enough
// arguments for format string", "%d format: a real number is required, not str", ...).
std::string percentFormat(const std::string& format, const Value& args);

}  // namespace shardscope::trace
