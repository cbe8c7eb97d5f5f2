#include "percent_format.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "builtin_args.h"
#include "format_spec.h"
#include "utf8_text.h"

namespace shardscope::trace {
namespace {

// One %-specifier's flags, width and precision.
struct Conversion {
  bool left = false, plus = false, space = false, alternate = false, zero = false;
  int width = 0;
  int precision = -1;
  char type = 0;
};

// A one-element tensor converts as its element, as float(t) and int(t) do.
Value numberOf(const Value& v) {
  if (v->type == Type::Tensor && v->tensor.numel() == 1)
    return builtin_args::fromTensorList(v->tensor.reshape({}));
  return v;
}

std::string padded(std::string s, const Conversion& c) {
  const size_t length = codePoints(s);  // characters, as Python pads
  if (int(length) >= c.width) return s;
  const std::string pad(size_t(c.width) - length, ' ');
  return c.left ? s + pad : pad + s;
}

FormatSpec specOf(const Conversion& c, char type) {
  FormatSpec s;
  s.type = type;
  s.width = c.width;
  s.align = c.left ? '<' : '>';
  s.sign = c.plus ? '+' : c.space ? ' ' : '-';
  s.alternate = c.alternate;
  if (c.zero && !c.left) {
    s.zeroPad = true;
    s.fill = "0";
    s.align = '=';
  }
  return s;
}

std::string integerText(long long v, const Conversion& c) {
  const char type = c.type == 'i' || c.type == 'u' ? 'd' : c.type;
  if (c.precision < 0) return formatInteger(v, specOf(c, type));
  // A precision is the least number of digits: "%.3d" % 5 is "005".
  Conversion digitsOnly;
  digitsOnly.type = type;
  const unsigned long long magnitude = v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v;
  std::string digits = formatInteger((long long)magnitude, specOf(digitsOnly, type));
  if (int(digits.size()) < c.precision) digits.insert(0, size_t(c.precision) - digits.size(), '0');
  std::string prefix = v < 0 ? "-" : c.plus ? "+" : c.space ? " " : "";
  if (c.alternate && type != 'd') prefix += type == 'o' ? "0o" : type == 'x' ? "0x" : "0X";
  if (c.zero && !c.left && int(prefix.size() + digits.size()) < c.width)
    digits.insert(0, size_t(c.width) - prefix.size() - digits.size(), '0');
  return padded(prefix + digits, c);
}

std::string converted(const Conversion& c, const Value& arg) {
  switch (c.type) {
    case 's':
    case 'r':
    case 'a': {
      std::string text = c.type == 's' ? str(arg) : c.type == 'r' ? repr(arg) : ascii(arg);
      if (c.precision >= 0) text.resize(prefixOf(text, size_t(c.precision)));
      return padded(text, c);
    }
    case 'c': {
      const Value v = numberOf(arg);
      if (v->type == Type::Str && codePoints(v->str) == 1) return padded(v->str, c);
      if (v->type != Type::Int && v->type != Type::Bool)
        throw RuntimeFailure("%c requires int or char");
      return formatInteger(v->intValue, specOf(c, 'c'));
    }
    case 'd':
    case 'i':
    case 'u':
    case 'o':
    case 'x':
    case 'X': {
      const Value v = numberOf(arg);
      const bool decimal = c.type == 'd' || c.type == 'i' || c.type == 'u';
      if (v->type == Type::Float && decimal) {
        if (!std::isfinite(v->floatValue))
          throw RuntimeFailure(std::string("cannot convert float ") +
                               (std::isnan(v->floatValue) ? "NaN" : "infinity") + " to integer");
        return integerText((long long)std::trunc(v->floatValue), c);  // as int(x)
      }
      if (v->type != Type::Int && v->type != Type::Bool) {
        throw RuntimeFailure(std::string("%") + c.type +
                             " format: " + (decimal ? "a real number" : "an integer") +
                             " is required, not " + typeName(v->type));
      }
      return integerText(v->type == Type::Bool ? v->boolValue : v->intValue, c);
    }
    default: {  // e E f F g G
      const Value v = numberOf(arg);
      if (!isNumber(v))
        throw RuntimeFailure(std::string("must be real number, not ") + typeName(v->type));
      const double x = v->type == Type::Float  ? v->floatValue
                       : v->type == Type::Bool ? double(v->boolValue)
                                               : double(v->intValue);
      FormatSpec s = specOf(c, c.type);
      s.precision = c.precision < 0 ? 6 : c.precision;
      return formatFloat(x, s);
    }
  }
}

// Reads `format` and takes its arguments from a tuple (or the one value), or by key from a dict.
class PercentFormatter {
 public:
  PercentFormatter(const std::string& format, const Value& args)
      : f_(format),
        args_(args->type == Type::Tuple ? args->items : std::vector<Value>{args}),
        mapping_(args->type == Type::Dict ? args : nullptr),
        // Python counts anything indexable but a tuple or str as a mapping: no "not all arguments
        // converted" for `"x" % []`.
        indexable_(args->type == Type::Dict || args->type == Type::List ||
                   args->type == Type::Range || args->type == Type::Tensor) {}

  std::string run() {
    std::string out;
    for (i_ = 0; i_ < f_.size(); ++i_) {
      if (f_[i_] != '%') {
        out += f_[i_];
        continue;
      }
      ++i_;
      if (i_ < f_.size() && f_[i_] == '%') {
        out += '%';
        continue;
      }
      out += specifier();
    }
    if (!keyed_ && next_ < args_.size() && !indexable_)
      throw RuntimeFailure("not all arguments converted during string formatting");
    return out;
  }

 private:
  std::string specifier() {
    Value arg;
    if (at('(')) arg = keyed();
    Conversion c;
    for (; i_ < f_.size() && f_[i_] != 0 && std::strchr("-+ #0", f_[i_]); ++i_) {
      c.left |= f_[i_] == '-';
      c.plus |= f_[i_] == '+';
      c.space |= f_[i_] == ' ';
      c.alternate |= f_[i_] == '#';
      c.zero |= f_[i_] == '0';
    }
    c.width = number("width");
    if (c.width < 0) {  // "%*d" % (-5, 1) is left-justified in 5
      c.left = true;
      c.width = -c.width;
    }
    if (at('.')) {
      ++i_;
      c.precision = std::max(0, number("precision"));  // "%.*f" % (-1, x) is precision 0
    }
    // length modifiers: ignored (strchr would match a NUL byte too)
    while (i_ < f_.size() && f_[i_] != 0 && std::strchr("hlL", f_[i_])) ++i_;
    if (i_ >= f_.size()) throw RuntimeFailure("incomplete format");
    c.type = f_[i_];
    // CPython takes the argument before it reads the type: "%5%" % () is "not enough arguments"
    const Value value = arg ? arg : nextArgument();
    if (c.type == 0 || !std::strchr("sradiuoxXeEfFgGc", c.type)) {
      // The character's code point and index as Python counts them ('é' is 0xe9 at index 1, not
      // its first byte at a byte index), shown as '?' unless printable ASCII, as CPython does.
      size_t length = 1;
      const char32_t point = codePointAt(f_, i_, &length);
      char code[16];
      std::snprintf(code, sizeof code, "0x%x", unsigned(point));
      const char shown = point >= 31 && point <= 126 ? char(point) : '?';
      throw RuntimeFailure(std::string("unsupported format character '") + shown + "' (" + code +
                           ") at index " + std::to_string(codePoints(f_.substr(0, i_))));
    }
    return converted(c, value);
  }

  bool at(char ch) const { return i_ < f_.size() && f_[i_] == ch; }

  Value keyed() {
    if (!mapping_) throw RuntimeFailure("format requires a mapping");
    int depth = 0;
    const size_t from = i_ + 1;
    for (; i_ < f_.size(); ++i_) {
      if (f_[i_] == '(') ++depth;
      if (f_[i_] == ')' && --depth == 0) break;
    }
    if (i_ >= f_.size()) throw RuntimeFailure("incomplete format key");
    const std::string key = f_.substr(from, i_ - from);
    ++i_;
    keyed_ = true;
    next_ = args_.size();  // as CPython: a keyed field leaves no positional argument after it
    const auto it = findKey(*mapping_, string(key));
    if (it == mapping_->dict.end()) throw RuntimeFailure("KeyError: '" + key + "'");
    return it->second;
  }

  // Digits, or '*' for the next argument (an int); 0 when neither is there.
  int number(const char* what) {
    if (at('*')) {
      ++i_;
      const Value v = nextArgument();
      if (v->type != Type::Int) throw RuntimeFailure("* wants int");
      if (std::abs(v->intValue) > kMaxFormatWidth) tooLarge(what);
      return int(v->intValue);
    }
    long long n = 0;  // "%.f": precision 0
    for (; i_ < f_.size() && std::isdigit(uint8_t(f_[i_])); ++i_) {
      n = n * 10 + (f_[i_] - '0');
      if (n > kMaxFormatWidth) tooLarge(what);
    }
    return int(n);
  }

  [[noreturn]] static void tooLarge(const char* what) {
    throw RuntimeFailure(std::string("the format's ") + what + " is larger than " +
                         std::to_string(kMaxFormatWidth));
  }

  Value nextArgument() {
    if (next_ >= args_.size()) throw RuntimeFailure("not enough arguments for format string");
    return args_[next_++];
  }

  const std::string& f_;
  std::vector<Value> args_;
  Value mapping_;
  bool indexable_;
  bool keyed_ = false;
  size_t i_ = 0, next_ = 0;
};

}  // namespace

std::string percentFormat(const std::string& format, const Value& args) {
  return PercentFormatter(format, args).run();
}

}  // namespace shardscope::trace
