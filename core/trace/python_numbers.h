// Numbers as Python makes them from text, rounds them and does arithmetic on them: int("1_000"),
// float(" inf "), the float-to-int conversions of int() and round(), round(x, n) of an int and of
// a float, 64-bit int arithmetic that refuses to overflow and floor division, each
// with the error Python raises where it refuses (as a RuntimeFailure, which the interpreter turns
// into the script's error at its line).
#pragma once

#include <string>

#include <utility>

#include "operators.h"
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

// a op b of ints for +, - and * (op names it in the error), an error past 64 bits.
long long checkedInt(long long a, long long b, BinaryOp op);
// a // b of ints, flooring as Python does; an error for b == 0 and past 64 bits.
long long floorDiv(long long a, long long b);
// Python's float divmod: {x // y, x % y}, the remainder moved to the divisor's sign, so that
// `1 // 0.1` is 9.0 and `1 % 0.1` about 0.1; an error naming op (// or %) for y == 0.
std::pair<double, double> floatDivmod(double x, double y, BinaryOp op);

}  // namespace shardscope::trace
