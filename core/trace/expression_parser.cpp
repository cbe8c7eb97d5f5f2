#include "expression_parser.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include "assignment_targets.h"

namespace shardscope::trace {

ExprPtr ExpressionParser::standaloneExpression() {
  ExprPtr e = testList();
  if (!at(TokenKind::Newline) && !at(TokenKind::End)) fail("unexpected " + describe(peek()));
  return e;
}

// Python's parameter list: `a, b=1`, then `/` (those before it positional only), `*args` or a
// bare `*` (those after it keyword only), `**kwargs` last; each checked as Python's compiler does.
std::vector<Param> ExpressionParser::parameters(const char* close) {
  using Kind = Param::Kind;
  const bool annotations = std::string(close) == ")";  // lambda parameters end at ':'
  std::vector<Param> ps;
  bool keywordOnly = false, slash = false, defaulted = false, varKeyword = false;
  std::optional<SourceLocation> bareStar;  // a `*` with no keyword-only parameter after it yet
  while (!atOp(close)) {
    const SourceLocation at = peek().at;
    if (varKeyword) fail("arguments cannot follow var-keyword argument");
    if (acceptOp("/")) {
      if (ps.empty()) failAt(at, "at least one argument must precede /");
      if (slash) failAt(at, "/ may appear only once");
      if (keywordOnly) failAt(at, "/ must be ahead of *");
      for (Param& p : ps) p.kind = Kind::PositionalOnly;
      slash = true;
      if (!acceptOp(",")) break;
      continue;
    }
    Kind kind = keywordOnly ? Kind::KeywordOnly : Kind::PositionalOrKeyword;
    if (acceptOp("**")) {
      kind = Kind::VarKeyword;
      varKeyword = true;
    } else if (acceptOp("*")) {
      if (keywordOnly) failAt(at, "* argument may appear only once");
      keywordOnly = true;
      if (atOp(",") || atOp(close)) {
        bareStar = at;
        if (!acceptOp(",")) break;
        continue;
      }
      kind = Kind::VarPositional;
    }
    Param p{expectName(), nullptr, kind};
    for (const Param& q : ps) {
      if (q.name == p.name)
        failAt(at, "duplicate argument '" + p.name + "' in function definition");
    }
    if (annotations && acceptOp(":")) test();  // annotations are ignored
    if (atOp("=") && (kind == Kind::VarPositional || kind == Kind::VarKeyword)) {
      fail(kind == Kind::VarPositional ? "var-positional argument cannot have default value"
                                       : "var-keyword argument cannot have default value");
    }
    if (acceptOp("=")) p.defaultValue = test();
    if (kind == Kind::PositionalOrKeyword) {
      if (!p.defaultValue && defaulted) failAt(at, "non-default argument follows default argument");
      defaulted |= p.defaultValue != nullptr;
    }
    if (kind == Kind::KeywordOnly) bareStar.reset();
    ps.push_back(std::move(p));
    if (!acceptOp(",")) break;
  }
  if (bareStar) failAt(*bareStar, "named arguments must follow bare *");
  return ps;
}

void ExpressionParser::checkTarget(const Expr& e, const char* verb) const {
  const bool deleting = std::strcmp(verb, "delete") == 0;
  if (e.kind == ExprKind::Starred && !deleting)
    failAt(e.at, "starred assignment target must be in a list or tuple");
  if (const Expr* bad = firstNonTarget(e, deleting))
    failAt(startOf(*bad), std::string("cannot ") + verb + " " + pythonKindName(*bad));
  if (const Expr* both = secondStarred(e))
    failAt(startOf(*both), "multiple starred expressions in assignment");
}

ExprPtr ExpressionParser::starredOr(ExprPtr (ExpressionParser::*item)()) {
  if (!atOp("*")) return (this->*item)();
  auto s = makeExpr(ExprKind::Starred, peek().at);
  ++i_;
  s->a = orExpr();
  return s;
}

void ExpressionParser::refuseLoneStarred(const Expr& e) const {
  if (e.kind == ExprKind::Starred) failAt(e.at, "can't use starred expression here");
}

// The targets of a for loop, a comprehension's for clause or `with ... as`.
ExprPtr ExpressionParser::targetList() {
  const SourceLocation loc = peek().at;
  ExprPtr target = starredOr(&ExpressionParser::orExpr);
  if (atOp(",")) {  // `a, b` or `a,`: a tuple
    auto t = makeExpr(ExprKind::Tuple, loc);
    t->items.push_back(target);
    while (acceptOp(",")) {
      if (atName("in") || atOp("=") || atOp(":")) break;
      t->items.push_back(starredOr(&ExpressionParser::orExpr));
    }
    target = t;
  }
  checkTarget(*target, "assign to");
  return target;
}

ExprPtr ExpressionParser::testList() {
  const SourceLocation loc = peek().at;
  ExprPtr first = starredOr(&ExpressionParser::test);
  if (!atOp(",")) {
    // `*a = x` and `*a += 1` are the target's own errors
    const bool assigned =
        peek().kind == TokenKind::Op && peek().text.back() == '=' && peek().text != "==";
    if (!assigned) refuseLoneStarred(*first);
    return first;
  }
  auto t = makeExpr(ExprKind::Tuple, loc);
  t->items.push_back(first);
  while (acceptOp(",")) {
    if (at(TokenKind::Newline) || atOp("=") || atOp(")") || at(TokenKind::End) || atOp(";")) break;
    t->items.push_back(starredOr(&ExpressionParser::test));
  }
  return t;
}

ExprPtr ExpressionParser::test() {
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

ExprPtr ExpressionParser::orTest() {
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

ExprPtr ExpressionParser::andTest() {
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

ExprPtr ExpressionParser::notTest() {
  if (atName("not")) {
    Nest nest(*this);
    auto u = makeExpr(ExprKind::Unary, peek().at);
    ++i_;
    u->unaryOp = UnaryOp::Not;
    u->a = notTest();
    return u;
  }
  return comparison();
}

ExprPtr ExpressionParser::comparison() {
  ExprPtr first = orExpr();
  std::vector<CompareOp> ops;
  std::vector<ExprPtr> operands{first};
  for (;;) {
    CompareOp op;
    const Token& t = peek();
    if (const auto symbolic = compareOpOf(t.text); t.kind == TokenKind::Op && symbolic) {
      op = *symbolic;
      ++i_;
    } else if (atName("in")) {
      op = CompareOp::In;
      ++i_;
    } else if (atName("not") && peek(1).kind == TokenKind::Name && peek(1).text == "in") {
      op = CompareOp::NotIn;
      i_ += 2;
    } else if (atName("is")) {
      ++i_;
      op = CompareOp::Is;
      if (atName("not")) {
        ++i_;
        op = CompareOp::IsNot;
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
  c->compareOps = std::move(ops);
  return c;
}

ExprPtr ExpressionParser::binary(ExprPtr (ExpressionParser::*next)(),
                                 std::initializer_list<const char*> ops) {
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
    b->binaryOp = *binaryOpOf(found);
    b->a = e;
    b->b = (this->*next)();
    e = b;
  }
}

ExprPtr ExpressionParser::orExpr() {
  return binary(&ExpressionParser::xorExpr, {"|"});
}

ExprPtr ExpressionParser::xorExpr() {
  return binary(&ExpressionParser::andExpr, {"^"});
}

ExprPtr ExpressionParser::andExpr() {
  return binary(&ExpressionParser::shiftExpr, {"&"});
}

ExprPtr ExpressionParser::shiftExpr() {
  return binary(&ExpressionParser::arith, {"<<", ">>"});
}

ExprPtr ExpressionParser::arith() {
  return binary(&ExpressionParser::term, {"+", "-"});
}

ExprPtr ExpressionParser::term() {
  return binary(&ExpressionParser::factor, {"*", "/", "//", "%", "@"});
}

ExprPtr ExpressionParser::factor() {
  if (atOp("-") || atOp("+") || atOp("~")) {
    Nest nest(*this);
    auto u = makeExpr(ExprKind::Unary, peek().at);
    u->unaryOp = *unaryOpOf(peek().text);
    ++i_;
    u->a = factor();
    return u;
  }
  return power();
}

ExprPtr ExpressionParser::power() {
  ExprPtr base = trailers(atom());
  if (!atOp("**")) return base;
  Nest nest(*this);  // right-associative: 2 ** 2 ** ... nests
  auto b = makeExpr(ExprKind::Binary, peek().at);
  ++i_;
  b->binaryOp = BinaryOp::Pow;
  b->a = base;
  b->b = factor();  // right-associative, binds tighter than unary on its left
  return b;
}

ExprPtr ExpressionParser::trailers(ExprPtr e) {
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
      bool mappingUnpacked = false;
      while (!atOp(")")) {
        if (acceptOp("**")) {  // f(**kwargs): its keys are keyword names
          c->names.push_back("**");
          c->values.push_back(test());
          mappingUnpacked = true;
        } else if (atOp("*")) {  // f(*args): its items are positional arguments
          if (mappingUnpacked)
            fail("iterable argument unpacking follows keyword argument unpacking");
          auto s = makeExpr(ExprKind::Starred, peek().at);
          ++i_;
          s->a = test();
          if (atName("for")) failAt(s->at, "iterable unpacking cannot be used in comprehension");
          c->items.push_back(s);
        } else if (peek().kind == TokenKind::Name && peek(1).kind == TokenKind::Op &&
                   peek(1).text == "=") {
          if (std::find(c->names.begin(), c->names.end(), peek().text) != c->names.end())
            fail("keyword argument repeated: " + peek().text);
          c->names.push_back(t_[i_].text);
          i_ += 2;
          c->values.push_back(test());
        } else {
          const SourceLocation at = peek().at;
          c->items.push_back(test());
          if (atName("for")) {  // f(x for x in xs): a generator, the call's one argument
            const SourceLocation start = startOf(*c->items.back());
            if (c->items.size() != 1 || !c->names.empty())
              failAt(start, "Generator expression must be parenthesized");
            c->items.back() = comprehension(c->items.back(), nullptr, start);
            c->items.back()->text = "<genexpr>";
            if (!atOp(")")) failAt(start, "Generator expression must be parenthesized");
          }
          if (mappingUnpacked) failAt(at, "positional argument follows keyword argument unpacking");
          if (!c->names.empty()) failAt(at, "positional argument follows keyword argument");
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

// Python 3.11's subscripts: a slice, or items (slices, or '*' and an expression: `d[*a or b]`)
// that make a tuple, as `d[*a]` and `d[*a, 1]` do.
ExprPtr ExpressionParser::subscriptList() {
  const SourceLocation loc = peek().at;
  const auto item = [this] {
    if (!atOp("*")) return subscript();
    auto starred = makeExpr(ExprKind::Starred, peek().at);
    ++i_;
    starred->a = test();
    return starred;
  };
  ExprPtr first = item();
  if (!atOp(",") && first->kind != ExprKind::Starred) return first;
  auto t = makeExpr(ExprKind::Tuple, loc);
  t->items.push_back(first);
  while (acceptOp(",")) {
    if (atOp("]")) break;
    t->items.push_back(item());
  }
  return t;
}

ExprPtr ExpressionParser::subscript() {
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

ExprPtr ExpressionParser::atom() {
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
      std::vector<SourceLocation> charAt;  // where text's characters stand (a plain part's: at it)
      bool f = false;
      while (at(TokenKind::String) || at(TokenKind::FString)) {
        const Token& part = peek();
        if (part.kind == TokenKind::FString) {
          f = true;
          text += part.text;
          charAt.insert(charAt.end(), part.charAt.begin(), part.charAt.end());
        } else {
          text += escapeBraces(part.text);
          charAt.resize(text.size(), part.at);
        }
        ++i_;
      }
      if (!f) {
        auto e = makeExpr(ExprKind::Str, t.at);
        e->text = unescapeBraces(text);
        return e;
      }
      return fstring(text, t.at, charAt);
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
        ExprPtr first = starredOr(&ExpressionParser::test);
        if (first->kind == ExprKind::Starred && !atOp(","))
          failAt(first->at, atName("for") ? "iterable unpacking cannot be used in comprehension"
                                          : "cannot use starred expression here");
        if (atName("for")) {  // a generator expression, made whole at once (a list)
          ExprPtr made = comprehension(first, nullptr, t.at);
          made->text = "<genexpr>";
          expectOp(")");
          return made;
        }
        if (acceptOp(")")) {
          first->openParen = t.at;  // the outermost pair's, read last
          return first;
        }
        auto tup = makeExpr(ExprKind::Tuple, t.at);
        tup->items.push_back(first);
        while (acceptOp(",")) {
          if (atOp(")")) break;
          tup->items.push_back(starredOr(&ExpressionParser::test));
        }
        expectOp(")");
        return tup;
      }
      if (t.text == "[") {
        ++i_;
        auto list = makeExpr(ExprKind::List, t.at);
        while (!atOp("]")) {
          list->items.push_back(starredOr(&ExpressionParser::test));
          if (atName("for") && list->items.back()->kind == ExprKind::Starred)
            failAt(list->items.back()->at, "iterable unpacking cannot be used in comprehension");
          if (atName("for") && list->items.size() == 1) {
            ExprPtr made = comprehension(list->items[0], nullptr, t.at);
            expectOp("]");
            return made;
          }
          if (!acceptOp(",")) break;
        }
        expectOp("]");
        return list;
      }
      if (t.text == "{") {
        ++i_;
        auto dict = makeExpr(ExprKind::Dict, t.at);
        while (!atOp("}")) {
          if (acceptOp("**")) {  // {**other, ...}: its entries, in order
            dict->items.push_back(nullptr);
            dict->values.push_back(orExpr());
            if (atName("for")) fail("dict unpacking cannot be used in dict comprehension");
            if (!acceptOp(",")) break;
            continue;
          }
          if (atOp("*")) unsupported("set literals");
          dict->items.push_back(test());
          if (!atOp(":")) unsupported(atName("for") ? "set comprehensions" : "set literals");
          ++i_;
          dict->values.push_back(test());
          if (atName("for") && dict->items.size() == 1) {
            ExprPtr made = comprehension(dict->items[0], dict->values[0], t.at);
            expectOp("}");
            return made;
          }
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
  if (atOp("*")) fail("can't use starred expression here");
  fail("unexpected " + describe(t));
}

}  // namespace shardscope::trace
