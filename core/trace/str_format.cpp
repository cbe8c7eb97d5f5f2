#include "str_format.h"

#include <algorithm>
#include <cctype>

#include "builtin_args.h"
#include "interpreter.h"

namespace shardscope::trace {

using namespace builtin_args;

namespace {

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
      const size_t close = fieldEnd(s, i);
      out += field(s.substr(i + 1, close - i - 1), depth);
      i = close;
    }
    return out;
  }

 private:
  // The '}' that closes the field opened at s[open].
  static size_t fieldEnd(const std::string& s, size_t open) {
    int depth = 0, deepest = 0;
    for (size_t k = open; k < s.size(); ++k) {
      if (s[k] == '{') deepest = std::max(deepest, ++depth);
      if (s[k] == '}' && --depth == 0) return k;
    }
    if (deepest > 1) throw RuntimeFailure("unmatched '{' in format spec");
    if (open + 1 == s.size()) throw RuntimeFailure("Single '{' encountered in format string");
    throw RuntimeFailure("expected '}' before end of string");
  }

  // Where the field's name ends (at its '!' or ':'), read as CPython reads it: an index in
  // brackets may hold anything but ']', and a '{' outside one is an error.
  static size_t nameEnd(const std::string& text) {
    for (size_t k = 0; k < text.size(); ++k) {
      if (text[k] == '{') throw RuntimeFailure("unexpected '{' in field name");
      if (text[k] == '[' && (k = text.find(']', k)) == std::string::npos) break;
      if (text[k] == '!' || text[k] == ':') return k;
    }
    return std::string::npos;
  }

  std::string field(const std::string& text, int depth) {
    const size_t cut = nameEnd(text);
    const Value value = argument(text.substr(0, cut));  // before the spec's own fields
    std::string format = cut == std::string::npos ? "" : text.substr(cut);
    const size_t colon = format.find(':');
    if (colon != std::string::npos)
      format = format.substr(0, colon + 1) + this->format(format.substr(colon + 1), depth + 1);
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
