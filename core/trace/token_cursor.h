// The trace language parser's view of its tokens: the position, look-ahead, expectations, the
// errors a script's author sees (file, line, the line's text) and the nesting bound. The
// expression and statement parsers build on it (expression_parser.h, parser.cpp).
#pragma once

#include <algorithm>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "ast.h"
#include "lexer.h"

namespace shardscope::trace {

class TokenCursor {
 public:
  TokenCursor(std::vector<Token> tokens, const std::string& file, const std::string& source,
              int nesting = 0)
      : t_(std::move(tokens)),
        file_(file),
        lines_(std::make_shared<const std::vector<std::string>>(splitLines(source))),
        nesting_(nesting) {}

 protected:
  static std::vector<std::string> splitLines(const std::string& s) {
    std::vector<std::string> lines;
    std::stringstream ss(s);
    std::string l;
    while (std::getline(ss, l)) lines.push_back(l);
    return lines;
  }

  // How deeply expressions and blocks may nest: brackets, operator chains (`a + b + ...` is a tree
  // as deep as it is long), trailers, unary operators, `elif` chains, indented blocks. Parsing,
  // running and freeing a tree recurse once per level, and an invoke's block runs on a
  // coroutine's stack, so deeper input is refused here (CPython refuses deep nesting as well).
  static constexpr int kMaxNesting = 200;

  // One level deeper for as long as it lives.
  class Nest {
   public:
    explicit Nest(TokenCursor& p) : p_(p) { p_.deeper(); }
    ~Nest() { --p_.nesting_; }
    Nest(const Nest&) = delete;
    Nest& operator=(const Nest&) = delete;

   private:
    TokenCursor& p_;
  };
  void deeper() {
    if (nesting_ >= kMaxNesting) {
      fail("expressions and blocks nest more than " + std::to_string(kMaxNesting) +
           " levels deep here; split this into several statements");
    }
    ++nesting_;
  }

  const Token& peek(int k = 0) const { return t_[std::min(i_ + k, t_.size() - 1)]; }
  bool at(TokenKind k) const { return peek().kind == k; }
  bool atOp(const char* op) const { return peek().kind == TokenKind::Op && peek().text == op; }
  bool atName(const char* n) const { return peek().kind == TokenKind::Name && peek().text == n; }
  std::string lineText(int line) const { return trace::lineText(*lines_, line); }
  static std::string describe(const Token& t) {
    switch (t.kind) {
      case TokenKind::Newline:
        return "end of line";
      case TokenKind::Indent:
        return "indent";
      case TokenKind::Dedent:
        return "dedent";
      case TokenKind::End:
        return "end of file";
      default:
        return "'" + t.text + "'";
    }
  }
  [[noreturn]] void fail(const std::string& what) const { failAt(peek().at, what); }
  [[noreturn]] void failAt(SourceLocation at, const std::string& what) const {
    throw ScriptError(file_, at, lineText(at.line), "syntax error: " + what);
  }
  [[noreturn]] void unsupported(const std::string& what) const {
    throw ScriptError(file_, peek().at, lineText(peek().at.line),
                      what + ": not supported in trace scripts (see docs/trace-language.md)");
  }
  void expectOp(const char* op) {
    if (!atOp(op)) fail(std::string("expected '") + op + "', found " + describe(peek()));
    ++i_;
  }
  bool acceptOp(const char* op) {
    if (!atOp(op)) return false;
    ++i_;
    return true;
  }
  std::string expectName() {
    if (!at(TokenKind::Name) || keyword(peek().text))
      fail("expected a name, found " + describe(peek()));
    return t_[i_++].text;
  }
  static bool keyword(const std::string& s) {
    static const std::set<std::string> k = {
        "and",     "or",     "not",    "in",       "is",    "if",   "else",  "elif",     "for",
        "while",   "def",    "return", "with",     "as",    "pass", "break", "continue", "import",
        "from",    "assert", "lambda", "True",     "False", "None", "class", "try",      "except",
        "finally", "raise",  "global", "nonlocal", "yield", "del",  "async", "await"};
    return k.count(s) != 0;
  }
  void endOfStatement() {
    if (acceptOp(";")) return;
    if (at(TokenKind::Newline)) {
      ++i_;
      return;
    }
    if (at(TokenKind::End) || at(TokenKind::Dedent)) return;
    fail("unexpected " + describe(peek()) + " after the statement");
  }

  StmtPtr make(StmtKind k) {
    auto s = std::make_shared<Stmt>();
    s->kind = k;
    s->at = peek().at;
    s->lines = lines_;
    return s;
  }
  ExprPtr makeExpr(ExprKind k, SourceLocation loc) {
    auto e = std::make_shared<Expr>();
    e->kind = k;
    e->at = loc;
    return e;
  }

  std::vector<Token> t_;
  size_t i_ = 0;
  const std::string& file_;
  std::shared_ptr<const std::vector<std::string>> lines_;
  int nesting_ = 0;
};

}  // namespace shardscope::trace
