// Recursive-descent parser for the trace language, with Python's operator precedence.
#include <set>
#include <sstream>

#include "ast.h"
#include "lexer.h"

namespace shardscope::trace {
namespace {

std::vector<std::string> splitLines(const std::string& s) {
  std::vector<std::string> lines;
  std::stringstream ss(s);
  std::string l;
  while (std::getline(ss, l)) lines.push_back(l);
  return lines;
}

class Parser {
 public:
  Parser(std::vector<Token> tokens, const std::string& file, const std::string& source,
         int nesting = 0)
      : t_(std::move(tokens)), file_(file), lines_(splitLines(source)), nesting_(nesting) {}

  Block program() {
    Block b;
    while (!at(TokenKind::End)) {
      if (at(TokenKind::Newline)) {
        ++i_;
        continue;
      }
      statement(b);
    }
    return b;
  }

  ExprPtr standaloneExpression() {
    ExprPtr e = testList();
    if (!at(TokenKind::Newline) && !at(TokenKind::End)) fail("unexpected " + describe(peek()));
    return e;
  }

 private:
  // How deeply expressions and blocks may nest: brackets, operator chains (`a + b + ...` is a tree
  // as deep as it is long), trailers, unary operators, `elif` chains, indented blocks. Parsing,
  // running and freeing a tree recurse once per level, and an invoke's block runs on a
  // coroutine's stack, so deeper input is refused here (CPython refuses deep nesting as well).
  static constexpr int kMaxNesting = 200;

  // One level deeper for as long as it lives.
  class Nest {
   public:
    explicit Nest(Parser& p) : p_(p) { p_.deeper(); }
    ~Nest() { --p_.nesting_; }
    Nest(const Nest&) = delete;
    Nest& operator=(const Nest&) = delete;

   private:
    Parser& p_;
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
  std::string lineText(int line) const {
    if (line < 1 || line > int(lines_.size())) return "";
    std::string l = lines_[line - 1];
    l.erase(0, l.find_first_not_of(" \t"));
    return l;
  }
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
  [[noreturn]] void fail(const std::string& what) const {
    throw ScriptError(file_, peek().at, lineText(peek().at.line), "syntax error: " + what);
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
    s->source = lineText(s->at.line);
    return s;
  }
  ExprPtr makeExpr(ExprKind k, SourceLocation loc) {
    auto e = std::make_shared<Expr>();
    e->kind = k;
    e->at = loc;
    return e;
  }

  Block suite() {
    Nest nest(*this);
    expectOp(":");
    Block b;
    if (!at(TokenKind::Newline)) {  // simple statements on the same line
      simpleStatement(b);
      return b;
    }
    ++i_;
    if (!at(TokenKind::Indent)) fail("expected an indented block");
    ++i_;
    while (!at(TokenKind::Dedent) && !at(TokenKind::End)) {
      if (at(TokenKind::Newline)) {
        ++i_;
        continue;
      }
      statement(b);
    }
    if (at(TokenKind::Dedent)) ++i_;
    return b;
  }

  void statement(Block& out) {
    if (at(TokenKind::Indent)) fail("unexpected indent");
    if (atName("if")) return out.push_back(ifStatement());
    if (atName("for")) {
      auto s = make(StmtKind::For);
      ++i_;
      s->targets.push_back(targetList());
      if (!atName("in")) fail("expected 'in' in the for statement");
      ++i_;
      s->value = testList();
      s->body = suite();
      if (atName("else")) unsupported("for ... else");
      return out.push_back(s);
    }
    if (atName("while")) {
      auto s = make(StmtKind::While);
      ++i_;
      s->value = test();
      s->body = suite();
      if (atName("else")) unsupported("while ... else");
      return out.push_back(s);
    }
    if (atName("def")) {
      auto s = make(StmtKind::Def);
      ++i_;
      s->op = expectName();
      expectOp("(");
      s->params = parameters(")");
      expectOp(")");
      if (acceptOp("->")) test();
      s->body = suite();
      return out.push_back(s);
    }
    if (atName("with")) {
      auto s = make(StmtKind::With);
      ++i_;
      s->value = test();
      if (atName("as")) {
        ++i_;
        s->targets.push_back(targetList());
      }
      if (atOp(",")) unsupported("several context managers in one with statement");
      s->body = suite();
      return out.push_back(s);
    }
    for (const char* k : {"class", "try", "except", "finally", "raise", "global", "nonlocal",
                          "yield", "del", "async", "await"}) {
      if (atName(k)) unsupported(std::string("'") + k + "'");
    }
    if (atOp("@")) unsupported("decorators");
    simpleStatement(out);
  }

  StmtPtr ifStatement() {
    Nest nest(*this);  // an elif chain nests
    auto s = make(StmtKind::If);
    ++i_;  // if / elif
    s->value = test();
    s->body = suite();
    if (atName("elif")) {
      s->orElse.push_back(ifStatement());
    } else if (atName("else")) {
      ++i_;
      s->orElse = suite();
    }
    return s;
  }

  void simpleStatement(Block& out) {
    for (;;) {
      out.push_back(smallStatement());
      if (atOp(";")) {
        ++i_;
        if (at(TokenKind::Newline) || at(TokenKind::End)) break;
        continue;
      }
      endOfStatement();
      break;
    }
  }

  StmtPtr smallStatement() {
    if (atName("pass")) return ++i_, make(StmtKind::Pass);
    if (atName("break")) return ++i_, make(StmtKind::Break);
    if (atName("continue")) return ++i_, make(StmtKind::Continue);
    if (atName("return")) {
      auto s = make(StmtKind::Return);
      ++i_;
      if (!at(TokenKind::Newline) && !at(TokenKind::End) && !atOp(";")) s->value = testList();
      return s;
    }
    if (atName("assert")) {
      auto s = make(StmtKind::Assert);
      ++i_;
      s->value = test();
      if (acceptOp(",")) s->message = test();
      return s;
    }
    if (atName("import")) {
      auto s = make(StmtKind::Import);
      ++i_;
      s->op = dottedName();
      if (atName("as")) {
        ++i_;
        s->names.push_back(expectName());
      }
      return s;
    }
    if (atName("from")) {
      auto s = make(StmtKind::Import);
      ++i_;
      s->op = dottedName();
      if (!atName("import")) fail("expected 'import'");
      ++i_;
      const bool paren = acceptOp("(");
      do {
        s->names.push_back(expectName());
        if (atName("as")) unsupported("'import ... as' renaming");
      } while (acceptOp(","));
      if (paren) expectOp(")");
      s->targets.push_back(nullptr);  // marks "from ... import"
      return s;
    }
    auto s = make(StmtKind::Expr);
    ExprPtr first = testList();
    static const std::set<std::string> aug = {"+=", "-=", "*=", "/=", "//=", "%=", "**=", "@="};
    if (peek().kind == TokenKind::Op && aug.count(peek().text)) {
      s->kind = StmtKind::AugAssign;
      s->op = peek().text.substr(0, peek().text.size() - 1);
      ++i_;
      s->targets.push_back(first);
      s->value = testList();
      return s;
    }
    if (atOp("=")) {
      s->kind = StmtKind::Assign;
      s->targets.push_back(first);
      while (acceptOp("=")) {
        ExprPtr next = testList();
        if (atOp("=")) {
          s->targets.push_back(next);
        } else {
          s->value = next;
        }
      }
      return s;
    }
    s->value = first;
    return s;
  }

  std::string dottedName() {
    std::string n = expectName();
    while (acceptOp(".")) n += "." + expectName();
    return n;
  }

  std::vector<Param> parameters(const char* close) {
    const bool annotations = std::string(close) == ")";  // lambda parameters end at ':'
    std::vector<Param> ps;
    while (!atOp(close)) {
      if (atOp("*") || atOp("**")) unsupported("*args and **kwargs parameters");
      Param p{expectName(), nullptr};
      if (annotations && acceptOp(":")) test();  // annotations are ignored
      if (acceptOp("=")) p.defaultValue = test();
      ps.push_back(std::move(p));
      if (!acceptOp(",")) break;
    }
    return ps;
  }

  ExprPtr targetList() {
    const SourceLocation loc = peek().at;
    std::vector<ExprPtr> items{orExpr()};
    if (!atOp(",")) return items[0];
    while (acceptOp(",")) {
      if (atName("in") || atOp("=") || atOp(":")) break;
      items.push_back(orExpr());
    }
    auto t = makeExpr(ExprKind::Tuple, loc);
    t->items = std::move(items);
    return t;
  }

  ExprPtr testList() {
    const SourceLocation loc = peek().at;
    ExprPtr first = test();
    if (!atOp(",")) return first;
    auto t = makeExpr(ExprKind::Tuple, loc);
    t->items.push_back(first);
    while (acceptOp(",")) {
      if (at(TokenKind::Newline) || atOp("=") || atOp(")") || at(TokenKind::End) || atOp(";"))
        break;
      t->items.push_back(test());
    }
    return t;
  }

  ExprPtr test() {
    Nest nest(*this);
    if (atName("lambda")) {
      auto e = makeExpr(ExprKind::Lambda, peek().at);
      ++i_;
      e->params = parameters(":");
      expectOp(":");
      e->a = test();
      return e;
    }
    ExprPtr e = orTest();
    if (atName("if")) {
      auto c = makeExpr(ExprKind::IfElse, e->at);
      ++i_;
      c->b = orTest();
      if (!atName("else")) fail("expected 'else' in the conditional expression");
      ++i_;
      c->a = e;
      c->c = test();
      return c;
    }
    return e;
  }

  ExprPtr orTest() {
    const int outer = nesting_;
    ExprPtr e = andTest();
    while (atName("or")) {
      deeper();
      auto o = makeExpr(ExprKind::Or, peek().at);
      ++i_;
      o->a = e;
      o->b = andTest();
      e = o;
    }
    nesting_ = outer;
    return e;
  }
  ExprPtr andTest() {
    const int outer = nesting_;
    ExprPtr e = notTest();
    while (atName("and")) {
      deeper();
      auto o = makeExpr(ExprKind::And, peek().at);
      ++i_;
      o->a = e;
      o->b = notTest();
      e = o;
    }
    nesting_ = outer;
    return e;
  }
  ExprPtr notTest() {
    if (atName("not")) {
      Nest nest(*this);
      auto u = makeExpr(ExprKind::Unary, peek().at);
      ++i_;
      u->text = "not";
      u->a = notTest();
      return u;
    }
    return comparison();
  }
  ExprPtr comparison() {
    ExprPtr first = orExpr();
    std::vector<std::string> ops;
    std::vector<ExprPtr> operands{first};
    for (;;) {
      std::string op;
      const Token& t = peek();
      if (t.kind == TokenKind::Op && (t.text == "<" || t.text == ">" || t.text == "==" ||
                                      t.text == "!=" || t.text == "<=" || t.text == ">=")) {
        op = t.text;
        ++i_;
      } else if (atName("in")) {
        op = "in";
        ++i_;
      } else if (atName("not") && peek(1).kind == TokenKind::Name && peek(1).text == "in") {
        op = "not in";
        i_ += 2;
      } else if (atName("is")) {
        ++i_;
        op = "is";
        if (atName("not")) {
          ++i_;
          op = "is not";
        }
      } else {
        break;
      }
      ops.push_back(op);
      operands.push_back(orExpr());
    }
    if (ops.empty()) return first;
    auto c = makeExpr(ExprKind::Compare, first->at);
    c->items = std::move(operands);
    c->names = std::move(ops);
    return c;
  }

  ExprPtr binary(ExprPtr (Parser::*next)(), std::initializer_list<const char*> ops) {
    const int outer = nesting_;
    ExprPtr e = (this->*next)();
    for (;;) {
      const char* found = nullptr;
      for (const char* o : ops) {
        if (atOp(o)) found = o;
      }
      if (!found) {
        nesting_ = outer;
        return e;
      }
      deeper();
      auto b = makeExpr(ExprKind::Binary, peek().at);
      ++i_;
      b->text = found;
      b->a = e;
      b->b = (this->*next)();
      e = b;
    }
  }
  ExprPtr orExpr() { return binary(&Parser::xorExpr, {"|"}); }
  ExprPtr xorExpr() { return binary(&Parser::andExpr, {"^"}); }
  ExprPtr andExpr() { return binary(&Parser::shiftExpr, {"&"}); }
  ExprPtr shiftExpr() { return binary(&Parser::arith, {"<<", ">>"}); }
  ExprPtr arith() { return binary(&Parser::term, {"+", "-"}); }
  ExprPtr term() { return binary(&Parser::factor, {"*", "/", "//", "%", "@"}); }
  ExprPtr factor() {
    if (atOp("-") || atOp("+") || atOp("~")) {
      Nest nest(*this);
      auto u = makeExpr(ExprKind::Unary, peek().at);
      u->text = peek().text;
      ++i_;
      u->a = factor();
      return u;
    }
    return power();
  }
  ExprPtr power() {
    ExprPtr base = trailers(atom());
    if (!atOp("**")) return base;
    Nest nest(*this);  // right-associative: 2 ** 2 ** ... nests
    auto b = makeExpr(ExprKind::Binary, peek().at);
    ++i_;
    b->text = "**";
    b->a = base;
    b->b = factor();  // right-associative, binds tighter than unary on its left
    return b;
  }

  ExprPtr trailers(ExprPtr e) {
    const int outer = nesting_;
    for (;;) {
      if (atOp(".") || atOp("(") || atOp("[")) deeper();  // a.b(c)[d] nests like a chain
      if (atOp(".")) {
        ++i_;
        auto a = makeExpr(ExprKind::Attribute, peek().at);
        a->text = expectName();
        a->a = e;
        e = a;
      } else if (atOp("(")) {
        auto c = makeExpr(ExprKind::Call, peek().at);
        ++i_;
        c->a = e;
        while (!atOp(")")) {
          if (atOp("*") || atOp("**")) unsupported("argument unpacking with * or **");
          if (peek().kind == TokenKind::Name && peek(1).kind == TokenKind::Op &&
              peek(1).text == "=") {
            c->names.push_back(t_[i_].text);
            i_ += 2;
            c->values.push_back(test());
          } else {
            if (!c->names.empty()) fail("positional argument after keyword argument");
            c->items.push_back(test());
          }
          if (!acceptOp(",")) break;
        }
        expectOp(")");
        e = c;
      } else if (atOp("[")) {
        auto s = makeExpr(ExprKind::Subscript, peek().at);
        ++i_;
        s->a = e;
        s->b = subscriptList();
        expectOp("]");
        e = s;
      } else {
        nesting_ = outer;
        return e;
      }
    }
  }

  ExprPtr subscriptList() {
    const SourceLocation loc = peek().at;
    ExprPtr first = subscript();
    if (!atOp(",")) return first;
    auto t = makeExpr(ExprKind::Tuple, loc);
    t->items.push_back(first);
    while (acceptOp(",")) {
      if (atOp("]")) break;
      t->items.push_back(subscript());
    }
    return t;
  }
  ExprPtr subscript() {
    const SourceLocation loc = peek().at;
    ExprPtr lower;
    if (!atOp(":")) {
      lower = test();
      if (!atOp(":")) return lower;
    }
    auto s = makeExpr(ExprKind::Slice, loc);
    s->a = lower;
    expectOp(":");
    if (!atOp(":") && !atOp("]") && !atOp(",")) s->b = test();
    if (acceptOp(":")) {
      if (!atOp("]") && !atOp(",")) s->c = test();
    }
    return s;
  }

  ExprPtr atom() {
    const Token& t = peek();
    switch (t.kind) {
      case TokenKind::Int: {
        auto e = makeExpr(ExprKind::Int, t.at);
        e->intValue = t.intValue;
        ++i_;
        return e;
      }
      case TokenKind::Float: {
        auto e = makeExpr(ExprKind::Float, t.at);
        e->floatValue = t.floatValue;
        ++i_;
        return e;
      }
      case TokenKind::String:
      case TokenKind::FString: {
        // Adjacent literals concatenate; any f-string makes the whole an f-string.
        std::string text;
        bool f = false;
        ExprPtr result;
        while (at(TokenKind::String) || at(TokenKind::FString)) {
          if (at(TokenKind::FString)) f = true;
          text += peek().kind == TokenKind::FString ? peek().text : escapeBraces(peek().text);
          ++i_;
        }
        if (!f) {
          auto e = makeExpr(ExprKind::Str, t.at);
          e->text = unescapeBraces(text);
          return e;
        }
        return fstring(text, t.at);
      }
      case TokenKind::Name: {
        if (t.text == "True" || t.text == "False") {
          auto e = makeExpr(ExprKind::Bool, t.at);
          e->intValue = t.text == "True";
          ++i_;
          return e;
        }
        if (t.text == "None") return ++i_, makeExpr(ExprKind::None, t.at);
        if (keyword(t.text)) fail("unexpected keyword '" + t.text + "'");
        auto e = makeExpr(ExprKind::Name, t.at);
        e->text = t.text;
        ++i_;
        return e;
      }
      case TokenKind::Op: {
        if (t.text == "...") return ++i_, makeExpr(ExprKind::Ellipsis, t.at);
        if (t.text == "(") {
          ++i_;
          if (acceptOp(")")) return makeExpr(ExprKind::Tuple, t.at);
          ExprPtr first = test();
          if (atName("for")) unsupported("generator expressions");
          if (acceptOp(")")) return first;
          auto tup = makeExpr(ExprKind::Tuple, t.at);
          tup->items.push_back(first);
          while (acceptOp(",")) {
            if (atOp(")")) break;
            tup->items.push_back(test());
          }
          expectOp(")");
          return tup;
        }
        if (t.text == "[") {
          ++i_;
          auto list = makeExpr(ExprKind::List, t.at);
          while (!atOp("]")) {
            list->items.push_back(test());
            if (atName("for")) unsupported("list comprehensions");
            if (!acceptOp(",")) break;
          }
          expectOp("]");
          return list;
        }
        if (t.text == "{") {
          ++i_;
          auto dict = makeExpr(ExprKind::Dict, t.at);
          while (!atOp("}")) {
            dict->items.push_back(test());
            if (!atOp(":")) unsupported("set literals");
            ++i_;
            dict->values.push_back(test());
            if (atName("for")) unsupported("dict comprehensions");
            if (!acceptOp(",")) break;
          }
          expectOp("}");
          return dict;
        }
        break;
      }
      default:
        break;
    }
    fail("unexpected " + describe(t));
  }

  static std::string escapeBraces(const std::string& s) {
    std::string o;
    for (char c : s) {
      o += c;
      if (c == '{' || c == '}') o += c;
    }
    return o;
  }
  static std::string unescapeBraces(const std::string& s) {
    std::string o;
    for (size_t i = 0; i < s.size(); ++i) {
      o += s[i];
      if ((s[i] == '{' || s[i] == '}') && i + 1 < s.size() && s[i + 1] == s[i]) ++i;
    }
    return o;
  }

  ExprPtr fstring(const std::string& text, SourceLocation loc) {
    auto e = makeExpr(ExprKind::FString, loc);
    std::string literal;
    for (size_t i = 0; i < text.size(); ++i) {
      const char c = text[i];
      if ((c == '{' || c == '}') && i + 1 < text.size() && text[i + 1] == c) {
        literal += c;
        ++i;
        continue;
      }
      if (c != '{') {
        literal += c;
        continue;
      }
      int depth = 1;
      size_t j = i + 1;
      for (; j < text.size() && depth > 0; ++j) {
        if (text[j] == '{' || text[j] == '[' || text[j] == '(') ++depth;
        if (text[j] == '}' || text[j] == ']' || text[j] == ')') --depth;
      }
      if (depth != 0)
        throw ScriptError(file_, loc, lineText(loc.line), "syntax error: unclosed '{' in f-string");
      std::string inner = text.substr(i + 1, j - i - 2), format;
      // Split "expr!r:spec" at the top-level '!' or ':'.
      int d = 0;
      for (size_t k = 0; k < inner.size(); ++k) {
        const char ch = inner[k];
        if (ch == '[' || ch == '(' || ch == '{') ++d;
        if (ch == ']' || ch == ')' || ch == '}') --d;
        if (d == 0 && (ch == ':' || (ch == '!' && k + 1 < inner.size() && inner[k + 1] != '='))) {
          format = inner.substr(k);
          inner = inner.substr(0, k);
          break;
        }
      }
      Parser sub(tokenize(inner, file_), file_, "", nesting_);
      e->names.push_back(literal);
      literal.clear();
      e->items.push_back(sub.standaloneExpression());
      e->formats.push_back(format);
      i = j - 1;
    }
    e->names.push_back(literal);
    return e;
  }

  std::vector<Token> t_;
  size_t i_ = 0;
  const std::string& file_;
  std::vector<std::string> lines_;
  int nesting_ = 0;
};

}  // namespace

std::shared_ptr<Program> parseProgram(const std::string& source, const std::string& file) {
  auto p = std::make_shared<Program>();
  p->file = file;
  p->source = source;
  p->body = Parser(tokenize(source, file), file, source).program();
  return p;
}

}  // namespace shardscope::trace
