// Numbers as Python makes them from text and rounds them: int("1_000"), float(" inf "), the
// float-to-int conversions of int() and round(), and round(x, n) of an int and of a float, each
// with the error Python raises where it refuses (as a RuntimeFailure, which the interpreter turns
// into the script's error at its line).
#pragma once

#include <string>

#include "value.h"

namespace shardscope::trace {

// int(text): a decimal int with an optional sign, whitespace around it and underscores between
// digits allowed, nothing else.
long long intFromText(const std::string& text);
// float(text): a number, "inf" or "nan" with an optional sign, and nothing after it.
double floatFromText(const std::string& text);
// A float's integral value as an int (`fn` names the builtin in the error for inf, nan, |x| >=
// 2**63).
long long floatToInt(double x, const char* fn);
// round(x, ndigits) of an int, a half going to the even multiple.
Value roundInt(long long x, long long ndigits);
// round(x, ndigits) of a float as CPython rounds: the exact binary value, a half to the even digit.
double roundFloat(double x, long long ndigits);

}  // namespace shardscope::trace
