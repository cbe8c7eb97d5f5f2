#include "python_numbers.h"

#include <charconv>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string_view>
#include <vector>

namespace shardscope::trace {
namespace {

// `text` without the whitespace around it (Python's int() and float() allow it).
std::string_view stripped(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\n\r\f\v");
  if (first == std::string_view::npos) return {};
  return text.substr(first, text.find_last_not_of(" \t\n\r\f\v") - first + 1);
}

// `text` without the underscores Python allows in int() and float() of a string: each one between
// two digits ("1_000", "1_0.5"); nullopt when one stands elsewhere ("_1", "1__0", "1_", "1_.5",
// "1e_5").
std::optional<std::string> withoutUnderscores(std::string_view text) {
  std::string out;
  char prev = '\0';
  for (const char c : text) {
    const bool digit = c >= '0' && c <= '9';
    if (c == '_' && !(prev >= '0' && prev <= '9')) return std::nullopt;  // only after a digit
    if (c != '_') {
      if (prev == '_' && !digit) return std::nullopt;  // and before one
      out += c;
    }
    prev = c;
  }
  if (prev == '_') return std::nullopt;
  return out;
}

}  // namespace

// int(text): a decimal int with an optional sign and nothing else, as Python reads it ("3.5" and
// "12abc" are errors; std::stoll would read 3 and 12); underscores between digits are allowed.
long long intFromText(const std::string& text) {
  const std::optional<std::string> digits = withoutUnderscores(stripped(text));
  if (!digits)
    throw RuntimeFailure("invalid literal for int() with base 10: " + repr(string(text)) +
                         " (an underscore may only stand between two digits)");
  std::string_view s = *digits;
  const bool plus = !s.empty() && s[0] == '+';
  if (plus) s.remove_prefix(1);  // from_chars takes '-' only
  long long v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec == std::errc::result_out_of_range)
    throw RuntimeFailure("int(" + repr(string(text)) +
                         ") does not fit in an int (ints are 64-bit)");
  if (s.empty() || (plus && s[0] == '-') || ec != std::errc() || end != s.data() + s.size())
    throw RuntimeFailure("invalid literal for int() with base 10: " + repr(string(text)) +
                         " (int() of a string takes decimal digits with an optional sign)");
  return v;
}

// float(text): a number, "inf" or "nan" with an optional sign, and nothing after it; underscores
// between digits are allowed.
double floatFromText(const std::string& text) {
  const std::optional<std::string> plain = withoutUnderscores(stripped(text));
  const std::string s = plain.value_or("");
  char* end = nullptr;
  const double v = s.empty() ? 0 : std::strtod(s.c_str(), &end);
  const bool hex = s.find_first_of("xX") != std::string::npos;  // strtod reads 0x1p3; Python not
  if (!plain || s.empty() || hex || end != s.c_str() + s.size())
    throw RuntimeFailure("could not convert string to float: " + repr(string(text)));
  return v;
}

// A float's integral value as an int; an error for one an int cannot hold (inf, nan, |x| >= 2**63).
long long floatToInt(double x, const char* fn) {
  if (std::isnan(x)) throw RuntimeFailure(std::string(fn) + "(): cannot convert float nan to int");
  if (!(x >= -9223372036854775808.0 && x < 9223372036854775808.0))
    throw RuntimeFailure(std::string(fn) + "(): " + repr(floating(x)) +
                         " does not fit in an int (ints are 64-bit)");
  return (long long)x;
}

// round(x, n) of an int: x itself for n >= 0, else the nearest multiple of 10**-n, a half going to
// the even multiple (round(25, -1) is 20), as Python's int.__round__.
Value roundInt(long long x, long long ndigits) {
  if (ndigits >= 0) return integer(x);
  if (ndigits < -18) return integer(0);  // 10**19 > 2**63: every int is nearer 0 than 10**19
  long long unit = 1;
  for (long long i = 0; i < -ndigits; ++i) unit *= 10;
  long long q = x / unit, r = x % unit;
  if (r < 0) {  // floor division, so that 0 <= r < unit
    r += unit;
    --q;
  }
  if (2 * r > unit || (2 * r == unit && q % 2 != 0)) ++q;
  long long rounded = 0;
  if (__builtin_mul_overflow(q, unit, &rounded))
    throw RuntimeFailure("round(" + std::to_string(x) + ", " + std::to_string(ndigits) +
                         ") does not fit in an int (ints are 64-bit)");
  return integer(rounded);
}

// round(x, n) of a float as CPython rounds: the exact binary value of x to n decimals, a half going
// to the even digit, so round(2.675, 2) is 2.67 (2.675 is 2.67499999...). printf's %.*f rounds
// the exact value the same way; scaling by 10**n first (x * 100) would round twice.
double roundFloat(double x, long long ndigits) {
  if (!std::isfinite(x) || x == 0 || ndigits > 330) return x;  // already as precise as asked
  if (ndigits < 0) {
    const double unit = std::pow(10.0, double(-ndigits));
    return std::isinf(unit) ? 0.0 * x : std::nearbyint(x / unit) * unit;
  }
  std::vector<char> text(size_t(std::snprintf(nullptr, 0, "%.*f", int(ndigits), x)) + 1);
  std::snprintf(text.data(), text.size(), "%.*f", int(ndigits), x);
  return std::strtod(text.data(), nullptr);
}

long long checkedInt(long long a, long long b, BinaryOp op) {
  long long r = 0;
  bool overflow = false;
  if (op == BinaryOp::Add)
    overflow = __builtin_add_overflow(a, b, &r);
  else if (op == BinaryOp::Sub)
    overflow = __builtin_sub_overflow(a, b, &r);
  else if (op == BinaryOp::Mul)
    overflow = __builtin_mul_overflow(a, b, &r);
  if (overflow)
    throw RuntimeFailure("integer overflow in " + std::to_string(a) + " " + symbol(op) + " " +
                         std::to_string(b) + " (ints are 64-bit)");
  return r;
}

long long floorDiv(long long a, long long b) {
  if (b == 0) throw RuntimeFailure("integer division or modulo by zero");
  // The one quotient past 64 bits; the CPU traps on it (SIGFPE ended the process).
  if (a == LLONG_MIN && b == -1)
    throw RuntimeFailure("integer overflow in " + std::to_string(a) + " // -1 (ints are 64-bit)");
  long long q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

// Python's float divmod: the remainder is fmod's, moved to the divisor's sign, and the quotient is
// computed from it, so that `1 // 0.1` is 9.0 and `1 % 0.1` about 0.1 (floor(1 / 0.1) would say
// 10.0, as 1 / 0.1 rounds up to exactly 10.0) and `q * y + r` stays close to x.
std::pair<double, double> floatDivmod(double x, double y, BinaryOp op) {
  if (y == 0)
    throw RuntimeFailure(op == BinaryOp::Mod ? "float modulo by zero"
                                             : "float floor division by zero");
  double mod = std::fmod(x, y);
  double div = (x - mod) / y;
  if (mod != 0) {
    if ((y < 0) != (mod < 0)) {
      mod += y;
      div -= 1.0;
    }
  } else {
    mod = std::copysign(0.0, y);
  }
  double floored = std::copysign(0.0, x / y);
  if (div != 0) {
    floored = std::floor(div);
    if (div - floored > 0.5) floored += 1.0;
  }
  return {floored, mod};
}

}  // namespace shardscope::trace
