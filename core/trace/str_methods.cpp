// The methods of str in trace scripts (`s.split(",")`, `s.strip()`, `"{}".format(x)`): Python's
// semantics on the string's bytes (strings are bytes here: character classes and cases are
// ASCII's). Each takes Python's arguments and refuses others (checkArguments).
#include "str_methods.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "builtin_args.h"
#include "interpreter.h"
#include "str_format.h"
#include "utf8_text.h"

namespace shardscope::trace {

using namespace builtin_args;

namespace {

const char* const kWhitespace = " \t\n\r\f\v";

bool isSpace(char c) {
  return std::isspace(static_cast<unsigned char>(c)) != 0;
}

// Argument i (or keyword `name`) of str.fn(), which must be a str, as Python requires.
std::string textOf(const Args& a, size_t i, const char* name, const std::string& fn) {
  const Value v = arg(a, i, name, fn);
  if (v->type != Type::Str)
    throw RuntimeFailure(fn + "() argument '" + name + "' must be str, not " + typeName(v->type));
  return v->str;
}

// An optional str argument: nullopt when missing or None (split's sep, strip's chars).
std::optional<std::string> optionalText(const Args& a, size_t i, const char* name,
                                        const std::string& fn) {
  const Value* v = a.get(i, name);
  if (!v || (*v)->type == Type::None) return std::nullopt;
  return textOf(a, i, name, fn);
}

// [start, end) of find, count and index as Python reads them: slice bounds, clamped.
std::pair<long long, long long> searchBounds(const Args& a, size_t n) {
  const auto bound = [&](size_t i, const char* name, long long dflt) {
    const Value* v = a.get(i, name);
    if (!v || (*v)->type == Type::None) return dflt;
    long long k = asInt(*v, name);
    if (k < 0) k += (long long)n;
    return std::clamp(k, 0LL, (long long)n);
  };
  return {bound(1, "start", 0), bound(2, "end", (long long)n)};
}

// A start past the string's end: CPython's find, count, startswith and endswith match nothing
// there, not even "" (the clamped bounds alone would let "" match at the end).
bool startsPastEnd(const Args& a, size_t n) {
  const Value* from = a.get(1, "start");
  return from && (*from)->type != Type::None && asInt(*from, "start") > (long long)n;
}

// find / rfind: the lowest (highest) index of sub within [start, end), or -1.
long long findIn(const std::string& s, const std::string& sub, const Args& a, bool last) {
  const auto [start, end] = searchBounds(a, s.size());
  if (startsPastEnd(a, s.size())) return -1;
  if (end - start < (long long)sub.size()) return -1;
  const size_t p = last ? s.rfind(sub, size_t(end) - sub.size()) : s.find(sub, size_t(start));
  if (p == std::string::npos || (long long)p < start || (long long)(p + sub.size()) > end)
    return -1;
  return (long long)p;
}

Value textList(const std::vector<std::string>& parts) {
  std::vector<Value> out;
  for (const auto& p : parts) out.push_back(string(p));
  return list(out);
}

// split(sep=None, maxsplit=-1) and rsplit: on runs of whitespace without sep (ends ignored), else
// on each sep; at most maxsplit splits, from the left (right).
Value splitText(const std::string& s, const Args& a, bool fromRight, const std::string& fn) {
  const auto sep = optionalText(a, 0, "sep", fn);
  const long long maxsplit = asInt(optional(a, 1, "maxsplit", integer(-1)), "maxsplit");
  if (sep && sep->empty()) throw RuntimeFailure("empty separator");
  std::vector<std::string> parts;
  long long splits = 0;
  if (!sep) {
    if (!fromRight) {
      size_t i = 0;
      for (;;) {
        while (i < s.size() && isSpace(s[i])) ++i;
        if (i >= s.size()) break;
        if (maxsplit >= 0 && splits == maxsplit) {
          parts.push_back(s.substr(i));
          break;
        }
        size_t j = i;
        while (j < s.size() && !isSpace(s[j])) ++j;
        parts.push_back(s.substr(i, j - i));
        ++splits;
        i = j;
      }
    } else {
      size_t j = s.size();
      for (;;) {
        while (j > 0 && isSpace(s[j - 1])) --j;
        if (j == 0) break;
        if (maxsplit >= 0 && splits == maxsplit) {
          parts.push_back(s.substr(0, j));
          break;
        }
        size_t i = j;
        while (i > 0 && !isSpace(s[i - 1])) --i;
        parts.push_back(s.substr(i, j - i));
        ++splits;
        j = i;
      }
      std::reverse(parts.begin(), parts.end());
    }
    return textList(parts);
  }
  if (!fromRight) {
    size_t i = 0;
    for (size_t p;
         (maxsplit < 0 || splits < maxsplit) && (p = s.find(*sep, i)) != std::string::npos;
         ++splits) {
      parts.push_back(s.substr(i, p - i));
      i = p + sep->size();
    }
    parts.push_back(s.substr(i));
    return textList(parts);
  }
  size_t j = s.size();
  while ((maxsplit < 0 || splits < maxsplit) && j >= sep->size()) {
    const size_t p = s.rfind(*sep, j - sep->size());
    if (p == std::string::npos) break;
    parts.push_back(s.substr(p + sep->size(), j - p - sep->size()));
    j = p;
    ++splits;
  }
  parts.push_back(s.substr(0, j));
  std::reverse(parts.begin(), parts.end());
  return textList(parts);
}

// splitlines(keepends=False): at \n, \r, \r\n, \v, \f, \x1c, \x1d and \x1e, as Python's str.
Value splitLines(const std::string& s, const Args& a) {
  const bool keep = flag(a, 0, "keepends", false);
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (!std::strchr("\n\r\v\f\x1c\x1d\x1e", c) || c == 0) continue;
    size_t end = i;
    if (c == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
    lines.push_back(s.substr(start, (keep ? i + 1 : end) - start));
    start = i + 1;
  }
  if (start < s.size()) lines.push_back(s.substr(start));
  return textList(lines);
}

// partition(sep) / rpartition(sep): (before, sep, after) at the first (last) sep.
Value partitionText(const std::string& s, const std::string& sep, bool last) {
  if (sep.empty()) throw RuntimeFailure("empty separator");
  const size_t p = last ? s.rfind(sep) : s.find(sep);
  if (p == std::string::npos)
    return last ? tuple({string(""), string(""), string(s)})
                : tuple({string(s), string(""), string("")});
  return tuple({string(s.substr(0, p)), string(sep), string(s.substr(p + sep.size()))});
}

// isdigit, isalpha, ...: every character of a non-empty string in the class.
template <typename Test>
bool allOf(const std::string& s, Test test) {
  return !s.empty() && std::all_of(s.begin(), s.end(),
                                   [&](char c) { return test(static_cast<unsigned char>(c)); });
}

// isupper / islower: at least one cased character, and none of the other case.
bool casedAs(const std::string& s, bool upper) {
  bool cased = false;
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (upper ? std::islower(c) : std::isupper(c)) return false;
    cased |= std::isalpha(c) != 0;
  }
  return cased;
}

enum class Recase { Capitalize, Title, Swap };

std::string recased(std::string s, Recase how) {
  bool afterLetter = false;
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (how == Recase::Capitalize) {
      s[i] = char(i == 0 ? std::toupper(c) : std::tolower(c));
    } else if (how == Recase::Title) {
      s[i] = char(afterLetter ? std::tolower(c) : std::toupper(c));
      afterLetter = std::isalpha(c) != 0;
    } else {  // swapcase
      s[i] = char(std::isupper(c) ? std::tolower(c) : std::toupper(c));
    }
  }
  return s;
}

// center / ljust / rjust(width, fillchar=' ') and zfill(width).
enum class Pad { Center, Left, Right, Zeros };

std::string padded(const std::string& s, const Args& a, Pad how, const std::string& fn) {
  const long long width = asInt(arg(a, 0, "width", fn), "width");
  const size_t length = codePoints(s);  // characters, as Python pads
  if (width <= (long long)length) return s;
  const size_t margin = size_t(width) - length;
  std::string fill = how == Pad::Zeros ? "0" : " ";
  if (const Value* f = how == Pad::Zeros ? nullptr : a.get(1, "fillchar")) {
    if ((*f)->type != Type::Str)
      throw RuntimeFailure(std::string("The fill character must be a unicode character, not ") +
                           typeName((*f)->type));
    if (codePoints((*f)->str) != 1)
      throw RuntimeFailure("The fill character must be exactly one character long");
    fill = (*f)->str;
  }
  // Asked before it is built ("ab".center(10**12, '€') is refused, not allocated), saturating
  // where the bytes would not fit in 64 bits.
  int64_t bytes = 0;
  if (__builtin_mul_overflow(int64_t(margin), int64_t(fill.size()), &bytes) ||
      __builtin_add_overflow(bytes, int64_t(s.size()), &bytes))
    bytes = std::numeric_limits<int64_t>::max();
  interpreterOf(a).requestMemory(bytes);
  if (how == Pad::Zeros) {
    const bool signed_ = !s.empty() && (s[0] == '+' || s[0] == '-');
    return (signed_ ? s.substr(0, 1) : "") + std::string(margin, '0') + s.substr(signed_ ? 1 : 0);
  }
  // CPython's center: the odd character goes left when the width is odd.
  const size_t left = how == Pad::Left    ? 0
                      : how == Pad::Right ? margin
                                          : margin / 2 + (margin & size_t(width) & 1);
  std::string out;
  out.reserve(size_t(bytes));
  for (size_t i = 0; i < left; ++i) out += fill;
  out += s;
  for (size_t i = left; i < margin; ++i) out += fill;
  return out;
}

// replace(old, new, count=-1): the first `count` occurrences (all when count is negative), left
// to right; an empty `old` matches before every character and at the end.
std::string replaced(const std::string& s, const std::string& from, const std::string& to,
                     long long left) {
  std::string out;
  size_t at = 0;
  while (left != 0 && at <= s.size()) {
    const size_t p = from.empty() ? at : s.find(from, at);
    if (p == std::string::npos) break;
    out += s.substr(at, p - at) + to;
    if (from.empty()) {
      if (p < s.size()) out += s[p];
      at = p + 1;
    } else {
      at = p + from.size();
    }
    --left;
  }
  if (at < s.size()) out += s.substr(at);
  return out;
}

// startswith(prefix, start=None, end=None) and endswith: prefix a str or a tuple of them, tested
// against s[start:end]; a start past the end matches nothing, as in CPython.
bool affixed(const std::string& s, Args& a, bool atStart, const std::string& fn) {
  const Value whole = arg(a, 0, atStart ? "prefix" : "suffix", fn);
  const std::vector<Value> options = whole->type == Type::Tuple ? whole->items : std::vector{whole};
  if (startsPastEnd(a, s.size())) return false;
  const auto [start, end] = searchBounds(a, s.size());
  const std::string part = start < end ? s.substr(size_t(start), size_t(end - start)) : "";
  for (const Value& option : options) {
    if (option->type != Type::Str)
      throw RuntimeFailure(fn + "() takes a str or a tuple of str, got " + typeName(option->type));
    const std::string& p = option->str;
    if (part.size() >= p.size() &&
        (atStart ? part.compare(0, p.size(), p) == 0
                 : part.compare(part.size() - p.size(), p.size(), p) == 0))
      return true;
  }
  return false;
}

using Method = Value (*)(const std::string& s, Args& a, const std::string& fn);

struct StrMethod {
  Takes takes;
  Method run;
};

const std::map<std::string, StrMethod>& strMethods() {
  static const std::map<std::string, StrMethod> table = {
      {"join",
       {{1, {"iterable"}, 1},
        [](const std::string& s, Args& a, const std::string& fn) {
          std::string out;
          const std::vector<Value> items = elementsOf(arg(a, 0, "iterable", fn), interpreterOf(a));
          for (size_t i = 0; i < items.size(); ++i) {
            if (items[i]->type != Type::Str)  // as Python: no silent str() of a number
              throw RuntimeFailure("sequence item " + std::to_string(i) +
                                   ": expected str instance, " + typeName(items[i]->type) +
                                   " found");
            out += (i ? s : "") + items[i]->str;
          }
          return string(out);
        }}},
      {"upper",
       {{},
        [](const std::string& s, Args&, const std::string&) {
          std::string out = s;
          for (auto& c : out) c = char(std::toupper(static_cast<unsigned char>(c)));
          return string(out);
        }}},
      {"lower",
       {{},
        [](const std::string& s, Args&, const std::string&) {
          std::string out = s;
          for (auto& c : out) c = char(std::tolower(static_cast<unsigned char>(c)));
          return string(out);
        }}},
      {"strip",
       {{1, {"chars"}},
        [](const std::string& s, Args& a, const std::string& fn) {
          const std::string set = optionalText(a, 0, "chars", fn).value_or(kWhitespace);
          const size_t b = s.find_first_not_of(set), e = s.find_last_not_of(set);
          return string(b == std::string::npos ? "" : s.substr(b, e - b + 1));
        }}},
      {"startswith",
       {{3, {"prefix", "start", "end"}, 1},
        [](const std::string& s, Args& a, const std::string& fn) {
          return boolean(affixed(s, a, true, fn));
        }}},
      {"endswith",
       {{3, {"suffix", "start", "end"}, 1},
        [](const std::string& s, Args& a, const std::string& fn) {
          return boolean(affixed(s, a, false, fn));
        }}},
      {"replace",
       {{3, {"old", "new", "count"}, 2},
        [](const std::string& s, Args& a, const std::string& fn) {
          const long long count = asInt(optional(a, 2, "count", integer(-1)), "count");
          const std::string from = textOf(a, 0, "old", fn), to = textOf(a, 1, "new", fn);
          // At most this many replacements: the result's size is asked for first.
          int64_t hits = int64_t(from.empty() ? s.size() + 1 : s.size() / from.size());
          if (count >= 0) hits = std::min<int64_t>(hits, count);
          int64_t bytes = 0;
          if (__builtin_mul_overflow(hits, int64_t(to.size()), &bytes) ||
              __builtin_add_overflow(bytes, int64_t(s.size()), &bytes))
            bytes = int64_t(1) << 60;
          interpreterOf(a).requestMemory(bytes);
          return string(replaced(s, from, to, count));
        }}},
      {"split",
       {{2, {"sep", "maxsplit"}},
        [](const std::string& s, Args& a, const std::string& fn) {
          return splitText(s, a, false, fn);
        }}},
      {"rsplit",
       {{2, {"sep", "maxsplit"}},
        [](const std::string& s, Args& a, const std::string& fn) {
          return splitText(s, a, true, fn);
        }}},
      {"splitlines",
       {{1, {"keepends"}},
        [](const std::string& s, Args& a, const std::string&) { return splitLines(s, a); }}},
      {"lstrip",
       {{1, {"chars"}},
        [](const std::string& s, Args& a, const std::string& fn) {
          const std::string set = optionalText(a, 0, "chars", fn).value_or(kWhitespace);
          const size_t b = s.find_first_not_of(set);
          return string(b == std::string::npos ? "" : s.substr(b));
        }}},
      {"rstrip",
       {{1, {"chars"}},
        [](const std::string& s, Args& a, const std::string& fn) {
          const std::string set = optionalText(a, 0, "chars", fn).value_or(kWhitespace);
          const size_t e = s.find_last_not_of(set);
          return string(e == std::string::npos ? "" : s.substr(0, e + 1));
        }}},
      {"find",
       {{3, {"sub", "start", "end"}, 1},
        [](const std::string& s, Args& a, const std::string& fn) {
          return integer(findIn(s, textOf(a, 0, "sub", fn), a, false));
        }}},
      {"rfind",
       {{3, {"sub", "start", "end"}, 1},
        [](const std::string& s, Args& a, const std::string& fn) {
          return integer(findIn(s, textOf(a, 0, "sub", fn), a, true));
        }}},
      {"index",
       {{3, {"sub", "start", "end"}, 1},
        [](const std::string& s, Args& a, const std::string& fn) {
          const long long p = findIn(s, textOf(a, 0, "sub", fn), a, false);
          if (p < 0) throw RuntimeFailure("substring not found");
          return integer(p);
        }}},
      {"rindex",
       {{3, {"sub", "start", "end"}, 1},
        [](const std::string& s, Args& a, const std::string& fn) {
          const long long p = findIn(s, textOf(a, 0, "sub", fn), a, true);
          if (p < 0) throw RuntimeFailure("substring not found");
          return integer(p);
        }}},
      {"count",
       {{3, {"sub", "start", "end"}, 1},
        [](const std::string& s, Args& a, const std::string& fn) {
          const std::string sub = textOf(a, 0, "sub", fn);
          if (findIn(s, sub, a, false) < 0) return integer(0);
          const auto [start, end] = searchBounds(a, s.size());
          if (sub.empty()) return integer(end - start + 1);
          long long n = 0;
          for (size_t p = s.find(sub, size_t(start));
               p != std::string::npos && (long long)(p + sub.size()) <= end;
               p = s.find(sub, p + sub.size()))
            ++n;
          return integer(n);
        }}},
      {"partition",
       {{1, {"sep"}, 1},
        [](const std::string& s, Args& a, const std::string& fn) {
          return partitionText(s, textOf(a, 0, "sep", fn), false);
        }}},
      {"rpartition",
       {{1, {"sep"}, 1},
        [](const std::string& s, Args& a, const std::string& fn) {
          return partitionText(s, textOf(a, 0, "sep", fn), true);
        }}},
      {"removeprefix",
       {{1, {"prefix"}, 1},
        [](const std::string& s, Args& a, const std::string& fn) {
          const std::string p = textOf(a, 0, "prefix", fn);
          return string(s.compare(0, p.size(), p) == 0 ? s.substr(p.size()) : s);
        }}},
      {"removesuffix",
       {{1, {"suffix"}, 1},
        [](const std::string& s, Args& a, const std::string& fn) {
          const std::string p = textOf(a, 0, "suffix", fn);
          const bool ends = !p.empty() && s.size() >= p.size() &&
                            s.compare(s.size() - p.size(), p.size(), p) == 0;
          return string(ends ? s.substr(0, s.size() - p.size()) : s);
        }}},
      {"isdigit",
       {{},
        [](const std::string& s, Args&, const std::string&) {
          return boolean(allOf(s, ::isdigit));
        }}},
      {"isalpha",
       {{},
        [](const std::string& s, Args&, const std::string&) {
          return boolean(allOf(s, ::isalpha));
        }}},
      {"isalnum",
       {{},
        [](const std::string& s, Args&, const std::string&) {
          return boolean(allOf(s, ::isalnum));
        }}},
      {"isspace",
       {{},
        [](const std::string& s, Args&, const std::string&) {
          return boolean(allOf(s, ::isspace));
        }}},
      {"isupper",
       {{},
        [](const std::string& s, Args&, const std::string&) { return boolean(casedAs(s, true)); }}},
      {"islower",
       {{},
        [](const std::string& s, Args&, const std::string&) {
          return boolean(casedAs(s, false));
        }}},
      {"capitalize",
       {{},
        [](const std::string& s, Args&, const std::string&) {
          return string(recased(s, Recase::Capitalize));
        }}},
      {"title",
       {{},
        [](const std::string& s, Args&, const std::string&) {
          return string(recased(s, Recase::Title));
        }}},
      {"swapcase",
       {{},
        [](const std::string& s, Args&, const std::string&) {
          return string(recased(s, Recase::Swap));
        }}},
      {"center",
       {{2, {"width", "fillchar"}, 1, 2, Arity::Expected},
        [](const std::string& s, Args& a, const std::string& fn) {
          return string(padded(s, a, Pad::Center, fn));
        }}},
      {"ljust",
       {{2, {"width", "fillchar"}, 1, 2, Arity::Expected},
        [](const std::string& s, Args& a, const std::string& fn) {
          return string(padded(s, a, Pad::Left, fn));
        }}},
      {"rjust",
       {{2, {"width", "fillchar"}, 1, 2, Arity::Expected},
        [](const std::string& s, Args& a, const std::string& fn) {
          return string(padded(s, a, Pad::Right, fn));
        }}},
      {"zfill",
       {{1, {"width"}, 1, 1, Arity::ExactlyOne},
        [](const std::string& s, Args& a, const std::string& fn) {
          return string(padded(s, a, Pad::Zeros, fn));
        }}},
  };
  return table;
}

}  // namespace

Value strMethodOf(const Value& receiver, const std::string& name) {
  if (name == "format") {  // any arguments: the fields say which
    return builtin("str.format", [text = receiver->str](Args& a) { return formatText(text, a); });
  }
  const auto it = strMethods().find(name);
  if (it == strMethods().end()) return nullptr;
  const StrMethod& m = it->second;
  const std::string shown = "str." + name;
  return builtin(shown, [&m, shown, text = receiver->str](Args& a) {
    checkArguments(a, m.takes, shown);
    return m.run(text, a, shown);
  });
}

}  // namespace shardscope::trace
