#include "format_spec.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "utf8_text.h"

namespace shardscope::trace {
namespace {

bool isAlign(char c) {
  return c == '<' || c == '>' || c == '^' || c == '=';
}

[[noreturn]] void refuse(std::string_view spec, const std::string& why) {
  throw FormatSpecError("format spec '" + std::string(spec) + "': " + why);
}

int readNumber(std::string_view spec, size_t& i, const char* what) {
  long long n = 0;
  const size_t start = i;
  while (i < spec.size() && spec[i] >= '0' && spec[i] <= '9') {
    n = n * 10 + (spec[i] - '0');
    if (n > kMaxFormatWidth)
      refuse(spec, std::string(what) + " is larger than " + std::to_string(kMaxFormatWidth));
    ++i;
  }
  if (i == start)
    refuse(spec, std::string("expected a ") + what + " at position " + std::to_string(start + 1));
  return int(n);
}

// Pads `body` (already signed and prefixed) to the spec's width. `signLength` is how many leading
// bytes of `body` are sign and prefix ('=' alignment pads between them and the digits).
std::string pad(const std::string& body, size_t signLength, const FormatSpec& s,
                char defaultAlign) {
  const size_t length = codePoints(body);
  if (size_t(s.width) <= length) return body;
  const size_t missing = size_t(s.width) - length;
  std::string fill = s.fill;
  char align = s.align ? s.align : defaultAlign;
  if (s.zeroPad && !s.align) {
    fill = "0";
    align = '=';
  }
  const auto repeat = [&](size_t n) {
    std::string out;
    out.reserve(n * fill.size());
    for (size_t k = 0; k < n; ++k) out += fill;
    return out;
  };
  switch (align) {
    case '<':
      return body + repeat(missing);
    case '^':
      return repeat(missing / 2) + body + repeat(missing - missing / 2);
    case '=':
      return body.substr(0, signLength) + repeat(missing) + body.substr(signLength);
    default:
      return repeat(missing) + body;
  }
}

// Inserts `sep` every `every` digits from the right of the leading run of digits in `digits`
// (hexadecimal digits when `every` is 4: binary, octal and hex group by four).
std::string group(const std::string& digits, char sep, size_t every) {
  if (!sep) return digits;
  const auto isDigit = [&](char c) {
    const auto u = static_cast<unsigned char>(c);
    return every == 4 ? std::isxdigit(u) != 0 : std::isdigit(u) != 0;
  };
  size_t end = 0;
  while (end < digits.size() && isDigit(digits[end])) ++end;
  std::string out;
  for (size_t k = 0; k < end; ++k) {
    if (k && (end - k) % every == 0) out += sep;
    out += digits[k];
  }
  return out + digits.substr(end);
}

// '0' padding with a grouping separator pads the digits themselves, so the separators continue
// into the zeros ("0,001,234"), as Python does.
std::string groupPadded(const std::string& digits, const std::string& head, const FormatSpec& s,
                        size_t every) {
  std::string padded = digits;
  std::string grouped = group(padded, s.grouping, every);
  if (!(s.zeroPad && !s.align && s.grouping)) return grouped;
  while (head.size() + grouped.size() < size_t(s.width)) {
    padded.insert(padded.begin(), '0');
    grouped = group(padded, s.grouping, every);
  }
  return grouped;
}

std::string signOf(bool negative, char sign) {
  if (negative) return "-";
  if (sign == '+') return "+";
  if (sign == ' ') return " ";
  return "";
}

std::string toBase(unsigned long long v, int base, bool upper) {
  const char* digits = upper ? "0123456789ABCDEF" : "0123456789abcdef";
  if (v == 0) return "0";
  std::string out;
  while (v) {
    out.insert(out.begin(), digits[v % unsigned(base)]);
    v /= unsigned(base);
  }
  return out;
}

// printf of one double with a precision: the format string is one of our literals, never user text.
std::string printDouble(char conversion, int precision, double v, bool alternate) {
  char buf[kMaxFormatWidth + 400];
  int n = 0;
  switch (conversion) {
    case 'e':
      n = std::snprintf(buf, sizeof buf, alternate ? "%#.*e" : "%.*e", precision, v);
      break;
    case 'E':
      n = std::snprintf(buf, sizeof buf, alternate ? "%#.*E" : "%.*E", precision, v);
      break;
    case 'g':
      n = std::snprintf(buf, sizeof buf, alternate ? "%#.*g" : "%.*g", precision, v);
      break;
    case 'G':
      n = std::snprintf(buf, sizeof buf, alternate ? "%#.*G" : "%.*G", precision, v);
      break;
    default:  // 'f'
      n = std::snprintf(buf, sizeof buf, alternate ? "%#.*f" : "%.*f", precision, v);
      break;
  }
  if (n < 0 || size_t(n) >= sizeof buf) throw FormatSpecError("a formatted number is too long");
  return std::string(buf, size_t(n));
}

// Python's repr of a finite, non-negative float: the shortest digits that read back the same
// value, in fixed notation for exponents -4 .. 15 and scientific notation otherwise.
std::string shortestRepr(double v) {
  if (v == 0) return "0.0";
  std::string sci;
  for (int p = 0; p <= 16; ++p) {
    sci = printDouble('e', p, v, false);
    if (std::strtod(sci.c_str(), nullptr) == v) break;
  }
  const size_t e = sci.find('e');
  const int exponent = std::atoi(sci.c_str() + e + 1);
  std::string digits = sci.substr(0, 1) + (e > 2 ? sci.substr(2, e - 2) : "");
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  if (exponent < -4 || exponent >= 16) {
    const std::string mantissa =
        digits.substr(0, 1) + (digits.size() > 1 ? "." + digits.substr(1) : "");
    const std::string power = std::to_string(std::abs(exponent));
    return mantissa + "e" + (exponent < 0 ? "-" : "+") + (power.size() < 2 ? "0" : "") + power;
  }
  if (exponent < 0) return "0." + std::string(size_t(-exponent - 1), '0') + digits;
  const size_t whole = size_t(exponent) + 1;
  if (digits.size() <= whole) return digits + std::string(whole - digits.size(), '0') + ".0";
  return digits.substr(0, whole) + "." + digits.substr(whole);
}

}  // namespace

FormatSpec parseFormatSpec(std::string_view spec) {
  FormatSpec s;
  size_t i = 0;
  const size_t lead = spec.empty() ? 1 : utf8Length(static_cast<unsigned char>(spec[0]));
  if (spec.size() > lead && isAlign(spec[lead])) {
    s.fill = std::string(spec.substr(0, lead));
    s.align = spec[lead];
    i = lead + 1;
  } else if (!spec.empty() && isAlign(spec[0])) {
    s.align = spec[0];
    i = 1;
  }
  if (i < spec.size() && (spec[i] == '+' || spec[i] == '-' || spec[i] == ' ')) s.sign = spec[i++];
  if (i < spec.size() && spec[i] == 'z') {
    s.noNegativeZero = true;
    ++i;
  }
  if (i < spec.size() && spec[i] == '#') {
    s.alternate = true;
    ++i;
  }
  if (i < spec.size() && spec[i] == '0') {
    s.zeroPad = true;
    ++i;
  }
  if (i < spec.size() && spec[i] >= '0' && spec[i] <= '9') s.width = readNumber(spec, i, "width");
  if (i < spec.size() && (spec[i] == ',' || spec[i] == '_')) s.grouping = spec[i++];
  if (i < spec.size() && spec[i] == '.') {
    ++i;
    s.precision = readNumber(spec, i, "precision");
  }
  if (i < spec.size()) {
    const std::string types = "bcdeEfFgGnosxX%";
    if (types.find(spec[i]) == std::string::npos || i + 1 != spec.size())
      refuse(spec, "unexpected '" + std::string(spec.substr(i)) +
                       "' (the form is [[fill]align][sign][z][#][0][width][,|_][.precision][type], "
                       "type one of b c d e E f F g G n o s x X %)");
    s.type = spec[i];
  }
  return s;
}

std::string formatInteger(long long value, const FormatSpec& s) {
  switch (s.type) {
    case 'e':
    case 'E':
    case 'f':
    case 'F':
    case 'g':
    case 'G':
    case '%':
      return formatFloat(double(value), s);
    case 's':
      throw FormatSpecError("format code 's' does not apply to an int (use d, or str(x))");
    default:
      break;
  }
  if (s.precision >= 0) throw FormatSpecError("precision is not allowed in an integer format");
  if (s.noNegativeZero) throw FormatSpecError("'z' is not allowed in an integer format");
  if (s.type == 'c') {
    if (value < 0 || value > 0x10FFFF) throw FormatSpecError("%c arg not in range(0x110000)");
    FormatSpec str = s;
    str.type = 's';
    std::string ch;
    const auto cp = static_cast<unsigned long>(value);
    if (cp < 0x80) {
      ch = char(cp);
    } else if (cp < 0x800) {
      ch = {char(0xC0 | (cp >> 6)), char(0x80 | (cp & 0x3F))};
    } else if (cp < 0x10000) {
      ch = {char(0xE0 | (cp >> 12)), char(0x80 | ((cp >> 6) & 0x3F)), char(0x80 | (cp & 0x3F))};
    } else {
      ch = {char(0xF0 | (cp >> 18)), char(0x80 | ((cp >> 12) & 0x3F)),
            char(0x80 | ((cp >> 6) & 0x3F)), char(0x80 | (cp & 0x3F))};
    }
    return formatString(ch, str);
  }
  const bool negative = value < 0;
  const unsigned long long magnitude = negative ? 0ULL - static_cast<unsigned long long>(value)
                                                : static_cast<unsigned long long>(value);
  int base = 10;
  std::string prefix;
  switch (s.type) {
    case 'b':
      base = 2;
      prefix = "0b";
      break;
    case 'o':
      base = 8;
      prefix = "0o";
      break;
    case 'x':
      base = 16;
      prefix = "0x";
      break;
    case 'X':
      base = 16;
      prefix = "0X";
      break;
    default:
      break;
  }
  if (s.grouping == ',' && base != 10)
    throw FormatSpecError("cannot use ',' with '" + std::string(1, s.type) + "'");
  const std::string head = signOf(negative, s.sign) + (s.alternate ? prefix : "");
  const std::string digits =
      groupPadded(toBase(magnitude, base, s.type == 'X'), head, s, base == 10 ? 3 : 4);
  return pad(head + digits, head.size(), s, '>');
}

std::string formatFloat(double value, const FormatSpec& s) {
  if (s.type == 'd' || s.type == 'b' || s.type == 'o' || s.type == 'x' || s.type == 'X' ||
      s.type == 'c' || s.type == 's')
    throw FormatSpecError(std::string("unknown format code '") + s.type +
                          "' for a float (use f, e, g or %)");
  bool negative = std::signbit(value) && !std::isnan(value);
  const double magnitude = std::fabs(value);
  std::string body;
  if (std::isinf(magnitude) || std::isnan(magnitude)) {
    const bool upper = s.type == 'E' || s.type == 'F' || s.type == 'G';
    body = std::isnan(magnitude) ? (upper ? "NAN" : "nan") : (upper ? "INF" : "inf");
    if (s.type == '%') body += '%';
  } else if (s.type == '%') {
    body = printDouble('f', s.precision < 0 ? 6 : s.precision, magnitude * 100, s.alternate) + "%";
  } else if (s.type == 0 && s.precision < 0) {
    body = shortestRepr(magnitude);
    if (s.alternate && body.find('.') == std::string::npos) {  // '#': a decimal point always
      const size_t e = body.find('e');
      body.insert(e == std::string::npos ? body.size() : e, ".");
    }
  } else {
    char conversion = s.type == 'F' ? 'f' : s.type == 'n' ? 'g' : s.type;
    if (s.type == 0) conversion = 'g';
    body = printDouble(conversion, s.precision < 0 ? 6 : s.precision, magnitude, s.alternate);
    // Python's 'g' without a type keeps one digit after the point ("1.0", not "1").
    if (s.type == 0 && body.find_first_of(".eE") == std::string::npos) body += ".0";
  }
  // 'z': a value that rounds to zero loses its minus sign.
  if (s.noNegativeZero && body.find_first_of("123456789") == std::string::npos &&
      body.find_first_of("in") == std::string::npos)
    negative = false;
  const std::string head = signOf(negative, s.sign);
  if (std::isfinite(value)) body = groupPadded(body, head, s, 3);
  return pad(head + body, head.size(), s, '>');
}

std::string formatString(const std::string& value, const FormatSpec& s) {
  if (s.type && s.type != 's')
    throw FormatSpecError(std::string("unknown format code '") + s.type + "' for a string");
  if (s.sign != '-') throw FormatSpecError("sign is not allowed in a string format");
  if (s.noNegativeZero) throw FormatSpecError("'z' is not allowed in a string format");
  if (s.align == '=') throw FormatSpecError("'=' alignment is not allowed in a string format");
  if (s.alternate) throw FormatSpecError("'#' is not allowed in a string format");
  if (s.grouping) throw FormatSpecError("grouping is not allowed in a string format");
  std::string body = value;
  if (s.precision >= 0) body.resize(prefixOf(body, size_t(s.precision)));  // characters
  FormatSpec plain = s;
  plain.zeroPad = false;
  if (s.zeroPad && !s.align) {
    plain.fill = "0";
    plain.align = '<';
  }
  return pad(body, 0, plain, '<');
}

}  // namespace shardscope::trace
