// Statements of the trace language (blocks, if / for / while / def / with, assignments,
// imports) on top of the expression parser, and parseProgram.
#include <set>
#include <string>

#include "assignment_targets.h"
#include "ast.h"
#include "expression_parser.h"

namespace shardscope::trace {
namespace {

class Parser : public ExpressionParser {
 public:
  using ExpressionParser::ExpressionParser;

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

 private:
  // Where break, continue and return may stand. A function's body starts outside any loop; so does
  // a with statement's, which runs as a block on the model's ranks, apart from the driver's loops
  // and functions (a break there would have no loop to leave).
  struct Context {
    int loops = 0;
    bool inFunction = false;
    bool inWith = false;
  };
  // Enters a body with its own context for the parser's lifetime of the guard.
  class Body {
   public:
    Body(Parser& p, Context inner) : p_(p), outer_(p.context_) { p_.context_ = inner; }
    ~Body() { p_.context_ = outer_; }
    Body(const Body&) = delete;
    Body& operator=(const Body&) = delete;

   private:
    Parser& p_;
    Context outer_;
  };

  // A loop's body: one loop deeper.
  Block loopBody() {
    Context inner = context_;
    ++inner.loops;
    Body body(*this, inner);
    return suite();
  }

  // A loop's `else:` runs when the loop ends without break; a break or continue in it belongs to
  // the loop around this one.
  void loopElse(Stmt& loop) {
    if (!atName("else")) return;
    ++i_;
    loop.orElse = suite();
  }

  // break / continue outside a loop, return outside a function: Python's SyntaxError, or why a
  // with block cannot take one.
  void checkPlace(StmtKind kind) {
    const bool isReturn = kind == StmtKind::Return;
    if (isReturn ? context_.inFunction : context_.loops > 0) return;
    const std::string keyword = isReturn                  ? "return"
                                : kind == StmtKind::Break ? "break"
                                                          : "continue";
    if (context_.inWith) {
      fail("'" + keyword +
           "' inside a with block: the block runs on the model's ranks, apart from the driver's " +
           (isReturn ? "function; save the value and return it after the with statement"
                     : "loops; set a flag and test it after the with statement"));
    }
    if (isReturn) fail("'return' outside function");
    fail("'" + keyword + "' " +
         (kind == StmtKind::Break ? "outside loop" : "not properly in loop"));
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
      s->body = loopBody();
      loopElse(*s);
      return out.push_back(s);
    }
    if (atName("while")) {
      auto s = make(StmtKind::While);
      ++i_;
      s->value = condition();
      s->body = loopBody();
      loopElse(*s);
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
      Body body(*this, {0, true, false});
      s->body = suite();
      return out.push_back(s);
    }
    if (atName("with")) {
      auto s = make(StmtKind::With);
      ++i_;
      s->value = test();
      if (atName("as")) {  // one target: `with a as b, c:` is two context managers
        ++i_;
        s->targets.push_back(starredOr(&Parser::orExpr));
        checkTarget(*s->targets.back(), "assign to");
      }
      if (atOp(",")) unsupported("several context managers in one with statement");
      Body body(*this, {0, false, true});
      s->body = suite();
      return out.push_back(s);
    }
    for (const char* k : {"class", "try", "except", "finally", "raise", "global", "nonlocal",
                          "yield", "async", "await"}) {
      if (atName(k)) unsupported(std::string("'") + k + "'");
    }
    if (atOp("@")) unsupported("decorators");
    simpleStatement(out);
  }

  // An if's or while's condition; `if x = 1:` gets Python's hint.
  ExprPtr condition() {
    ExprPtr e = test();
    if (atOp("=")) assignmentHint(*e);
    return e;
  }

  // CPython's hint for a condition followed by '=' and a value that no other '=' follows: a name
  // may have meant '==' or ':=', another operand of '|' or tighter '=='. Otherwise suite()'s
  // "expected ':'" stands.
  void assignmentHint(const Expr& e) {
    const size_t equals = i_++;
    bool value = true;
    try {
      orExpr();
    } catch (const ScriptError&) {
      value = false;
    }
    value = value && !atOp("=") && !atOp(":=");
    i_ = equals;
    if (!value) return;
    if (e.kind == ExprKind::Name)
      failAt(e.at, "invalid syntax. Maybe you meant '==' or ':=' instead of '='?");
    const bool operand = e.kind != ExprKind::Compare && e.kind != ExprKind::And &&
                         e.kind != ExprKind::Or && e.kind != ExprKind::IfElse &&
                         e.kind != ExprKind::Lambda &&
                         !(e.kind == ExprKind::Unary && e.unaryOp == UnaryOp::Not);
    const bool display = e.kind == ExprKind::List || e.kind == ExprKind::Tuple ||
                         e.kind == ExprKind::Bool || e.kind == ExprKind::None ||
                         (e.kind == ExprKind::Comprehension && e.text == "<genexpr>");
    if (operand && !display)
      failAt(startOf(e), "cannot assign to " + pythonKindName(e) +
                             " here. Maybe you meant '==' instead of '='?");
  }

  StmtPtr ifStatement() {
    Nest nest(*this);  // an elif chain nests
    auto s = make(StmtKind::If);
    ++i_;  // if / elif
    s->value = condition();
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
    if (atName("break")) return checkPlace(StmtKind::Break), ++i_, make(StmtKind::Break);
    if (atName("continue")) return checkPlace(StmtKind::Continue), ++i_, make(StmtKind::Continue);
    if (atName("return")) {
      checkPlace(StmtKind::Return);
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
    if (atName("del")) {
      auto s = make(StmtKind::Del);
      ++i_;
      do {  // `del a, b[0],` (a trailing comma is allowed)
        if (at(TokenKind::Newline) || at(TokenKind::End) || atOp(";")) break;
        s->targets.push_back(starredOr(&Parser::test));
        checkTarget(*s->targets.back(), "delete");
      } while (acceptOp(","));
      if (s->targets.empty()) fail("expected what to delete after 'del'");
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
    static const std::set<std::string> aug = {
        "+=", "-=", "*=", "/=", "//=", "%=", "**=", "@=", "&=", "|=", "^=", "<<=", ">>="};
    if (peek().kind == TokenKind::Op && aug.count(peek().text)) {
      s->kind = StmtKind::AugAssign;
      s->augOp = *binaryOpOf(std::string_view(peek().text).substr(0, peek().text.size() - 1));
      ++i_;
      checkAugmentable(*first);
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
      for (const auto& target : s->targets) checkTarget(*target, "assign to");
      return s;
    }
    s->value = first;
    return s;
  }

  // `x += 1` takes one name, attribute or subscript, not a tuple or list of them.
  void checkAugmentable(const Expr& e) const {
    if (e.kind == ExprKind::Name || e.kind == ExprKind::Attribute || e.kind == ExprKind::Subscript)
      return;
    failAt(startOf(e),
           "'" + pythonKindName(e) + "' is an illegal expression for augmented assignment");
  }

  std::string dottedName() {
    std::string n = expectName();
    while (acceptOp(".")) n += "." + expectName();
    return n;
  }

  Context context_;
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
