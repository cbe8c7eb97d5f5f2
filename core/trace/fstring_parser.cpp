// The f-string part of the expression parser: literal text and replacement fields (`{x!r:>{w}}`),
// each field's expression parsed where it stands in the script, a spec's own fields as an f-string
// of the spec.
#include <cstring>

#include "expression_parser.h"

namespace shardscope::trace {

std::string ExpressionParser::escapeBraces(const std::string& s) {
  std::string o;
  for (char c : s) {
    o += c;
    if (c == '{' || c == '}') o += c;
  }
  return o;
}

std::string ExpressionParser::unescapeBraces(const std::string& s) {
  std::string o;
  for (size_t i = 0; i < s.size(); ++i) {
    o += s[i];
    if ((s[i] == '{' || s[i] == '}') && i + 1 < s.size() && s[i + 1] == s[i]) ++i;
  }
  return o;
}

// A replacement field's expression, read as Python reads it: inside parentheses, so spaces around
// it (`{ x }`) and line breaks are free. Its tokens, and its errors at parse time and when it
// runs, stand where the field does: `charAt` places each character of "(" + inner + ")" (its '('
// stands for the '{', its ')' for what ends the field).
ExprPtr ExpressionParser::fieldExpression(const std::string& inner, SourceLocation loc,
                                          const std::vector<SourceLocation>& charAt) {
  if (inner.find_first_not_of(" \t\n") == std::string::npos)
    throw ScriptError(file_, charAt.front(), lineText(charAt.front().line),
                      "syntax error: f-string: empty expression not allowed");
  const std::string source = "(" + inner + ")";
  std::vector<size_t> lineStarts{0};
  for (size_t k = 0; k < source.size(); ++k)
    if (source[k] == '\n') lineStarts.push_back(k + 1);
  const auto place = [&](SourceLocation at) {
    if (at.line < 1 || size_t(at.line) > lineStarts.size() || at.column < 1) return loc;
    const size_t k = lineStarts[size_t(at.line - 1)] + size_t(at.column - 1);
    return k < charAt.size() ? charAt[k] : charAt.back();
  };
  const auto inField = [&](const ScriptError& error, const std::string& message) {
    const SourceLocation at = place(error.location());
    return ScriptError(file_, at, lineText(at.line),
                       message + " (in the f-string's field '{" + inner + "}')");
  };
  std::vector<Token> tokens;
  try {
    tokens = tokenize(source, file_);
  } catch (const ScriptError& error) {
    throw inField(error, "syntax error: " + error.message());
  }
  for (Token& t : tokens) {
    t.at = place(t.at);
    for (SourceLocation& c : t.charAt) c = place(c);  // a nested f-string's characters
  }
  try {
    ExpressionParser sub(std::move(tokens), file_, "", nesting_);
    sub.lines_ = lines_;
    return sub.standaloneExpression();
  } catch (const ScriptError& error) {
    // At the closing parenthesis added above: the user wrote none, the field ended too early.
    const bool atAddedParen = error.location().line == charAt.back().line &&
                              error.location().column == charAt.back().column;
    throw ScriptError(file_, error.location(), lineText(error.location().line),
                      (atAddedParen ? std::string("syntax error: the expression is incomplete")
                                    : error.message()) +
                          " (in the f-string's field '{" + inner + "}')");
  }
}

ExprPtr ExpressionParser::fstring(const std::string& text, SourceLocation loc,
                                  const std::vector<SourceLocation>& charAt, bool inSpec) {
  SS_ASSERT(charAt.size() == text.size(), "an f-string's characters are each placed");
  auto e = makeExpr(ExprKind::FString, loc);
  std::string literal;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if ((c == '{' || c == '}') && i + 1 < text.size() && text[i + 1] == c) {
      literal += c;
      ++i;
      continue;
    }
    const auto failAtChar = [&](size_t k, const std::string& what) {
      throw ScriptError(file_, charAt[k], lineText(charAt[k].line), "syntax error: " + what);
    };
    if (c == '}') failAtChar(i, "f-string: single '}' is not allowed");
    if (c != '{') {
      literal += c;
      continue;
    }
    // The field ends at the '}' that closes its '{'; brackets inside must pair up, as Python's.
    std::string open = "{";
    size_t j = i + 1;
    for (; j < text.size() && !open.empty(); ++j) {
      const char ch = text[j];
      if (ch == '{' || ch == '[' || ch == '(') open += ch;
      if (ch != '}' && ch != ']' && ch != ')') continue;
      const char opener = open.back();
      if (ch == (opener == '{' ? '}' : opener == '[' ? ']' : ')')) {
        open.pop_back();
      } else if (open.size() == 1) {
        failAtChar(j, std::string("f-string: unmatched '") + ch + "'");
      } else {
        failAtChar(j, std::string("f-string: closing parenthesis '") + ch +
                          "' does not match opening parenthesis '" + opener + "'");
      }
    }
    if (!open.empty()) failAtChar(i, "unclosed '{' in f-string");
    std::string inner = text.substr(i + 1, j - i - 2), format;
    size_t formatAt = 0;  // where format starts in text
    // Split "expr!r:spec" at the top-level '!' or ':'.
    int d = 0;
    for (size_t k = 0; k < inner.size(); ++k) {
      const char ch = inner[k];
      if (ch == '[' || ch == '(' || ch == '{') ++d;
      if (ch == ']' || ch == ')' || ch == '}') --d;
      if (d == 0 && (ch == ':' || (ch == '!' && k + 1 < inner.size() && inner[k + 1] != '='))) {
        format = inner.substr(k);
        formatAt = i + 1 + k;
        inner = inner.substr(0, k);
        break;
      }
    }
    // A spec with fields of its own (`{x:>{width}}`) is an f-string made when the field is
    // formatted; format keeps the conversion.
    ExprPtr spec;
    const size_t colon = format.find(':');
    if (colon != std::string::npos && format.find('{', colon) != std::string::npos) {
      const auto from = charAt.begin() + std::ptrdiff_t(formatAt + colon + 1);
      if (inSpec) failAtChar(formatAt + colon + 1, "f-string: expressions nested too deeply");
      const std::string specText = format.substr(colon + 1);
      spec = fstring(specText, *from, {from, from + std::ptrdiff_t(specText.size())}, true);
      format.resize(colon);
    }
    // `{x=}` prints the expression's text as written, then its repr (or its format, with a spec).
    const size_t last = inner.find_last_not_of(" \t");
    if (last != std::string::npos && inner[last] == '=' &&
        (last == 0 || !std::strchr("=!<>", inner[last - 1]))) {
      literal += inner;
      inner.resize(last);
      if (format.empty() && !spec) format = "!r";
    }
    e->names.push_back(literal);
    literal.clear();
    // "(" + inner + ")" stands at the '{', the field's text, and what ends it ('}', '!', ':')
    const auto from = charAt.begin() + std::ptrdiff_t(i);
    std::vector<SourceLocation> fieldAt(from, from + std::ptrdiff_t(inner.size() + 2));
    e->items.push_back(fieldExpression(inner, loc, fieldAt));
    e->formats.push_back(format);
    e->values.push_back(spec);
    i = j - 1;
  }
  e->names.push_back(literal);
  return e;
}

}  // namespace shardscope::trace
