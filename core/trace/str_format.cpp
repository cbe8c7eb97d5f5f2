#include "str_format.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>

#include "builtin_args.h"
#include "interpreter.h"
#include "utf8_text.h"

namespace shardscope::trace {

using namespace builtin_args;

namespace {

// A conversion character as CPython's error names it: itself when printable ASCII past the space,
// else \x and its code point in hex ('\x20', '\xe9').
std::string conversionName(char32_t c) {
  if (c > 32 && c < 127) return std::string(1, char(c));
  char hex[16];
  std::snprintf(hex, sizeof hex, "\\x%x", unsigned(c));
  return hex;
}

// str.format(*args, **kwargs): fields {}, {0}, {name}, each with !r / !s / !a and :spec as an
// f-string field formats them, a spec with fields of its own ("{:>{}}", one level deep, as
// Python's); {{ and }} are braces. Indexing inside a field ({0[1]}, {a.b}) is not supported.
class TextFormatter {
 public:
  explicit TextFormatter(Args& a) : a_(a), in_(interpreterOf(a)) {}

  // `s` with its fields replaced; depth 1 is a spec's fields.
  std::string format(const std::string& s, int depth = 0) {
    std::string out;
    for (size_t i = 0; i < s.size(); ++i) {
      const char c = s[i];
      if ((c == '{' || c == '}') && i + 1 < s.size() && s[i + 1] == c) {
        out += c;
        ++i;
        continue;
      }
      if (c == '}') throw RuntimeFailure("Single '}' encountered in format string");
      if (c != '{') {
        out += c;
        continue;
      }
      if (depth > 1) throw RuntimeFailure("Max string recursion exceeded");
      const Field f = readField(s, i);
      out += field(f, depth);
      i = f.end;
    }
    return out;
  }

 private:
  // A field as CPython's parse_field reads it: its name, its conversion ('!r': r, or 0), its spec
  // (after ':'), and the index of its closing '}'.
  struct Field {
    std::string name;
    char32_t conversion = 0;  // a code point: Python names a non-ASCII one in its error
    std::string spec;
    size_t end = 0;
  };

  // The field that opens at s[open]. The name ends at '}', ':' or '!' (an index in brackets may
  // hold any of them, and a '{' outside one is an error); the spec's braces must balance.
  static Field readField(const std::string& s, size_t open) {
    size_t k = open + 1;
    if (k >= s.size()) throw RuntimeFailure("Single '{' encountered in format string");
    Field f;
    char c = 0;
    bool ended = false;
    while (k < s.size() && !ended) {
      c = s[k++];
      if (c == '{') throw RuntimeFailure("unexpected '{' in field name");
      if (c == '[') {
        while (k < s.size() && s[k] != ']') ++k;
        continue;
      }
      ended = c == '}' || c == ':' || c == '!';
    }
    if (!ended) throw RuntimeFailure("expected '}' before end of string");
    f.name = s.substr(open + 1, k - 1 - (open + 1));
    if (c == '}') {
      f.end = k - 1;
      return f;
    }
    if (c == '!') {
      if (k >= s.size())
        throw RuntimeFailure("end of string while looking for conversion specifier");
      size_t length = 1;
      f.conversion = codePointAt(s, k, &length);
      k += length;
      if (k < s.size()) {
        c = s[k++];
        if (c == '}') {
          f.end = k - 1;
          return f;
        }
        if (c != ':') throw RuntimeFailure("expected ':' after conversion specifier");
      }
    }
    const size_t from = k;
    for (int depth = 1; k < s.size(); ++k) {
      if (s[k] == '{') ++depth;
      if (s[k] == '}' && --depth == 0) {
        f.spec = s.substr(from, k - from);
        f.end = k;
        return f;
      }
    }
    throw RuntimeFailure("unmatched '{' in format spec");
  }

  // The field's text: its argument, converted, then formatted by its spec (whose own fields are
  // filled first), in CPython's order.
  std::string field(const Field& f, int depth) {
    const Value value = argument(f.name);
    std::string format;
    if (f.conversion) {
      if (f.conversion != U'r' && f.conversion != U's' && f.conversion != U'a')
        throw RuntimeFailure("Unknown conversion specifier " + conversionName(f.conversion));
      format = std::string("!") + char(f.conversion);
    }
    if (!f.spec.empty()) format += ":" + this->format(f.spec, depth + 1);
    return in_.formatValue(value, format)->str;
  }

  Value argument(const std::string& name) {
    if (name.empty()) {
      if (manual_)
        throw RuntimeFailure(
            "cannot switch from manual field specification to automatic field numbering");
      automatic_ = true;
      if (next_ >= a_.positional.size())
        throw RuntimeFailure("Replacement index " + std::to_string(next_) +
                             " out of range for positional args tuple");
      return a_.positional[next_++];
    }
    if (std::all_of(name.begin(), name.end(), ::isdigit)) {
      if (automatic_)
        throw RuntimeFailure(
            "cannot switch from automatic field numbering to manual field specification");
      manual_ = true;
      const size_t k = size_t(std::stoull(name.substr(0, 18)));
      if (name.size() > 18 || k >= a_.positional.size())
        throw RuntimeFailure("Replacement index " + name +
                             " out of range for positional args tuple");
      return a_.positional[k];
    }
    const Value* v = a_.keyword(name);
    if (v) return *v;
    if (name.find_first_of("[.") != std::string::npos)
      throw RuntimeFailure("str.format(): a field that indexes or reads an attribute ('" + name +
                           "') is not supported; compute it first, or use an f-string");
    throw RuntimeFailure("KeyError: '" + name + "'");
  }

  Args& a_;
  Interpreter& in_;
  size_t next_ = 0;
  bool automatic_ = false, manual_ = false;
};

}  // namespace

Value formatText(const std::string& s, CallArgs& a) {
  return string(TextFormatter(a).format(s));
}

}  // namespace shardscope::trace
