// Expressions of the trace language, by recursive descent with Python's operator precedence:
// from a comma-separated list down to atoms, trailers (calls, attributes, subscripts), lambdas
// and f-strings. The statement parser (parser.cpp) builds on it.
#pragma once

#include <initializer_list>
#include <string>
#include <vector>

#include "token_cursor.h"

namespace shardscope::trace {

class ExpressionParser : protected TokenCursor {
 public:
  using TokenCursor::TokenCursor;

  // A whole token list as one expression (an f-string's replacement field).
  ExprPtr standaloneExpression();

 protected:
  std::vector<Param> parameters(const char* close);
  // Fails as Python's compiler does where `e` holds a part that cannot be assigned to (`verb`
  // "assign to") or deleted ("delete").
  void checkTarget(const Expr& e, const char* verb) const;
  // `*operand` as a Starred expression where one may stand, else what `item` reads.
  ExprPtr starredOr(ExprPtr (ExpressionParser::*item)());
  void refuseLoneStarred(const Expr& e) const;
  ExprPtr targetList();
  ExprPtr testList();
  ExprPtr test();
  ExprPtr orTest();
  ExprPtr andTest();
  ExprPtr notTest();
  ExprPtr comparison();
  ExprPtr binary(ExprPtr (ExpressionParser::*next)(), std::initializer_list<const char*> ops);
  ExprPtr orExpr();
  ExprPtr xorExpr();
  ExprPtr andExpr();
  ExprPtr shiftExpr();
  ExprPtr arith();
  ExprPtr term();
  ExprPtr factor();
  ExprPtr power();
  ExprPtr trailers(ExprPtr e);
  ExprPtr subscriptList();
  ExprPtr subscript();
  ExprPtr atom();
  ExprPtr comprehension(ExprPtr element, ExprPtr value, SourceLocation at);
  static std::string escapeBraces(const std::string& s);
  static std::string unescapeBraces(const std::string& s);
  // An f-string's text, `charAt` placing each of its characters in the source; `inSpec`: the
  // spec of another f-string's field, whose fields may not have spec fields of their own.
  ExprPtr fstring(const std::string& text, SourceLocation loc,
                  const std::vector<SourceLocation>& charAt, bool inSpec = false);
  ExprPtr fieldExpression(const std::string& inner, SourceLocation loc,
                          const std::vector<SourceLocation>& charAt);
};

}  // namespace shardscope::trace
