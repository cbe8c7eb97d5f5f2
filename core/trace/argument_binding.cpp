#include "argument_binding.h"

#include <algorithm>

namespace shardscope::trace {
namespace {

using Kind = Param::Kind;

std::string plural(size_t n, const std::string& what) {
  return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
}

// 'a'; 'a' and 'b'; 'a', 'b', and 'c': as Python lists missing arguments.
std::string quotedList(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += names.size() == 2 ? " and " : i + 1 == names.size() ? ", and " : ", ";
    out += "'" + names[i] + "'";
  }
  return out;
}

bool byPosition(Kind k) {
  return k == Kind::PositionalOnly || k == Kind::PositionalOrKeyword;
}

// "f() takes from 1 to 2 positional arguments but 3 were given", as Python words it.
std::string tooManyPositional(const FunctionDef& f, size_t given, size_t keywordOnlyGiven) {
  size_t most = 0, least = 0;
  for (size_t i = 0; i < f.params.size(); ++i) {
    if (!byPosition(f.params[i].kind)) continue;
    ++most;
    if (!f.defaults[i]) ++least;
  }
  std::string takes = least == most
                          ? std::to_string(most)
                          : "from " + std::to_string(least) + " to " + std::to_string(most);
  takes += most == 1 && least == most ? " positional argument" : " positional arguments";
  std::string was = std::to_string(given) + (given == 1 ? " was given" : " were given");
  if (keywordOnlyGiven > 0) {
    was = plural(given, "positional argument") + " (and " +
          plural(keywordOnlyGiven, "keyword-only argument") + ") were given";
  }
  return f.qualifiedName + "() takes " + takes + " but " + was;
}

}  // namespace

std::vector<std::pair<std::string, Value>> bindArguments(const FunctionDef& f,
                                                         const CallArgs& args) {
  const std::vector<Param>& ps = f.params;
  std::vector<Value> values(ps.size());
  size_t slots = 0;  // parameters filled by position, which come first
  while (slots < ps.size() && byPosition(ps[slots].kind)) ++slots;
  const auto varPositional = std::find_if(
      ps.begin(), ps.end(), [](const Param& p) { return p.kind == Kind::VarPositional; });
  const auto varKeyword =
      std::find_if(ps.begin(), ps.end(), [](const Param& p) { return p.kind == Kind::VarKeyword; });
  for (size_t i = 0; i < std::min(slots, args.positional.size()); ++i)
    values[i] = args.positional[i];

  DictEntries extraKeywords;
  size_t keywordOnlyGiven = 0;
  for (const auto& keyword : args.keywords) {
    const std::string& name = keyword.first;  // not a structured binding: the lambda names it
    const Value& v = keyword.second;
    const auto p = std::find_if(ps.begin(), ps.end(), [&](const Param& q) {
      return q.name == name && q.kind != Kind::VarPositional && q.kind != Kind::VarKeyword;
    });
    if (p != ps.end() && p->kind != Kind::PositionalOnly) {
      Value& slot = values[size_t(p - ps.begin())];
      if (slot)
        throw RuntimeFailure(f.qualifiedName + "() got multiple values for argument '" + name +
                             "'");
      slot = v;
      keywordOnlyGiven += p->kind == Kind::KeywordOnly;
      continue;
    }
    if (varKeyword != ps.end()) {
      extraKeywords.emplace_back(string(name), v);
      continue;
    }
    // As CPython at the first keyword that fits no parameter: the positional-only parameters
    // named by any keyword, in their order, else this keyword
    std::string positionalOnly;
    for (const Param& q : ps) {
      const bool named = std::any_of(args.keywords.begin(), args.keywords.end(),
                                     [&](const auto& k) { return k.first == q.name; });
      if (q.kind == Kind::PositionalOnly && named)
        positionalOnly += (positionalOnly.empty() ? "" : ", ") + q.name;
    }
    if (!positionalOnly.empty()) {
      throw RuntimeFailure(f.qualifiedName +
                           "() got some positional-only arguments passed as keyword arguments: '" +
                           positionalOnly + "'");
    }
    throw RuntimeFailure(f.qualifiedName + "() got an unexpected keyword argument '" + name + "'");
  }
  if (args.positional.size() > slots && varPositional == ps.end())
    throw RuntimeFailure(tooManyPositional(f, args.positional.size(), keywordOnlyGiven));

  std::vector<std::string> missingPositional, missingKeywordOnly;
  for (size_t i = 0; i < ps.size(); ++i) {
    if (values[i] || ps[i].kind == Kind::VarPositional || ps[i].kind == Kind::VarKeyword) continue;
    if (f.defaults[i]) {
      values[i] = f.defaults[i];
      continue;
    }
    (ps[i].kind == Kind::KeywordOnly ? missingKeywordOnly : missingPositional)
        .push_back(ps[i].name);
  }
  const auto missing = [&](const std::vector<std::string>& names, const char* kind) {
    throw RuntimeFailure(f.qualifiedName + "() missing " +
                         plural(names.size(), std::string("required ") + kind + " argument") +
                         ": " + quotedList(names));
  };
  if (!missingPositional.empty()) missing(missingPositional, "positional");
  if (!missingKeywordOnly.empty()) missing(missingKeywordOnly, "keyword-only");

  std::vector<std::pair<std::string, Value>> bound;
  for (size_t i = 0; i < ps.size(); ++i) {
    if (ps[i].kind == Kind::VarPositional) {
      const auto from =
          args.positional.begin() + std::ptrdiff_t(std::min(slots, args.positional.size()));
      values[i] = tuple({from, args.positional.end()});
    } else if (ps[i].kind == Kind::VarKeyword) {
      values[i] = dict(std::move(extraKeywords));
    }
    bound.emplace_back(ps[i].name, values[i]);
  }
  return bound;
}

}  // namespace shardscope::trace
