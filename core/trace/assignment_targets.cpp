#include "assignment_targets.h"

namespace shardscope::trace {

const Expr* firstNonTarget(const Expr& e, bool deleting) {
  switch (e.kind) {
    case ExprKind::Name:
    case ExprKind::Attribute:
    case ExprKind::Subscript:
      return nullptr;
    case ExprKind::Tuple:
    case ExprKind::List:
      for (const auto& item : e.items) {
        const bool starred = item->kind == ExprKind::Starred && !deleting;
        if (const Expr* bad = firstNonTarget(starred ? *item->a : *item, deleting)) return bad;
      }
      return nullptr;
    default:
      return &e;
  }
}

const Expr* secondStarred(const Expr& e) {
  if (e.kind != ExprKind::Tuple && e.kind != ExprKind::List) return nullptr;
  int starred = 0;
  for (const auto& item : e.items) {
    if (item->kind == ExprKind::Starred && ++starred == 2) return &e;
    const Expr* inner = secondStarred(item->kind == ExprKind::Starred ? *item->a : *item);
    if (inner) return inner;
  }
  return nullptr;
}

SourceLocation startOf(const Expr& e) {
  const Expr* at = &e;
  for (;;) {  // an operator, call or trailer records where it stands, past its left operand
    if (at->openParen.line > 0) return at->openParen;
    switch (at->kind) {
      case ExprKind::Call:
      case ExprKind::Attribute:
      case ExprKind::Subscript:
      case ExprKind::Binary:
      case ExprKind::And:
      case ExprKind::Or:
      case ExprKind::IfElse:  // its body, in a
        at = at->a.get();
        continue;
      case ExprKind::Compare:
        at = at->items.front().get();
        continue;
      default:
        return at->at;
    }
  }
}

std::string pythonKindName(const Expr& e) {
  switch (e.kind) {
    case ExprKind::Name:
      return "name";
    case ExprKind::Int:
    case ExprKind::Float:
    case ExprKind::Str:
      return "literal";
    case ExprKind::Bool:
      return e.intValue ? "True" : "False";
    case ExprKind::None:
      return "None";
    case ExprKind::Ellipsis:
      return "ellipsis";
    case ExprKind::FString:
      return "f-string expression";
    case ExprKind::Tuple:
      return "tuple";
    case ExprKind::List:
      return "list";
    case ExprKind::Dict:
      return "dict literal";
    case ExprKind::Attribute:
      return "attribute";
    case ExprKind::Subscript:
      return "subscript";
    case ExprKind::Slice:
      return "slice";
    case ExprKind::Call:
      return "function call";
    case ExprKind::Compare:
      return "comparison";
    case ExprKind::IfElse:
      return "conditional expression";
    case ExprKind::Lambda:
      return "lambda";
    case ExprKind::Starred:
      return "starred";
    case ExprKind::Comprehension:
      if (e.text == "<dictcomp>") return "dict comprehension";
      if (e.text == "<genexpr>") return "generator expression";
      return "list comprehension";
    case ExprKind::Unary:
    case ExprKind::Binary:
    case ExprKind::And:
    case ExprKind::Or:
      return "expression";
  }
  return "expression";
}

}  // namespace shardscope::trace
