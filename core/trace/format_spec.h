// Python's format-specification mini-language (the part after ':' in an f-string field or in
// format(value, spec)): [[fill]align][sign][z][#][0][width][,|_][.precision][type]. Parsed into a
// FormatSpec and applied by our own code: user text never reaches a printf-family format string.
#pragma once

#include <string>
#include <string_view>

#include "core/error.h"

namespace shardscope::trace {

// A spec the mini-language does not allow, or one that does not fit the value's type.
class FormatSpecError : public Error {
 public:
  using Error::Error;
};

struct FormatSpec {
  std::string fill = " ";       // one character (UTF-8)
  char align = 0;               // '<', '>', '^', '=' or 0 (the type's default)
  char sign = '-';              // '+', '-' or ' '
  bool noNegativeZero = false;  // 'z': -0.0 (after rounding) formats as 0.0
  bool alternate = false;       // '#': 0b/0o/0x prefixes, a decimal point always
  bool zeroPad = false;         // '0' before the width: fill '0' after the sign
  int width = 0;
  char grouping = 0;   // ',' or '_' or 0
  int precision = -1;  // -1: not given
  char type = 0;       // b c d e E f F g G n o s x X % or 0
};

// Largest width and precision accepted: a script cannot ask for a gigabyte of padding.
inline constexpr int kMaxFormatWidth = 10000;

// Parses `spec`; throws FormatSpecError naming the spec and what is wrong.
FormatSpec parseFormatSpec(std::string_view spec);

// Formatting by value kind, as Python's int/float/str __format__ do; throws FormatSpecError for a
// type code that does not apply (e.g. 'd' for a float, 'f' for a string).
std::string formatInteger(long long value, const FormatSpec& spec);
std::string formatFloat(double value, const FormatSpec& spec);
std::string formatString(const std::string& value, const FormatSpec& spec);

}  // namespace shardscope::trace
