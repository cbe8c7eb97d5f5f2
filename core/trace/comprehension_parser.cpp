// The comprehension part of the expression parser: `[x for ...]`, `{k: v for ...}` and
// `(x for ...)` made into the function Python would make of each.
#include "expression_parser.h"

namespace shardscope::trace {

// A comprehension after its element (and a dict's value) was read, at its first `for`: its
// clauses (`for targets in iterable`, `if condition`, in any number after the first `for`) become
// the body of a function Python would make of it, called with the first iterable (evaluated where
// the comprehension stands; the rest in the function, so its loop names do not leak):
//   .result = [] (or {})
//   for targets in .0:            # then each further clause, nested
//       if condition:
//           .result.append(element)   (a dict: .result[element] = value)
//   return .result
// A generator expression is made the same way, whole at once: a list.
ExprPtr ExpressionParser::comprehension(ExprPtr element, ExprPtr value, SourceLocation at) {
  const auto name = [&](const char* text, SourceLocation loc) {
    auto n = makeExpr(ExprKind::Name, loc);
    n->text = text;
    return n;
  };
  const auto stmt = [&](StmtKind kind, SourceLocation loc) {
    auto s = std::make_shared<Stmt>();
    s->kind = kind;
    s->at = loc;
    s->lines = lines_;
    return s;
  };
  auto made = makeExpr(ExprKind::Comprehension, at);
  made->text = value ? "<dictcomp>" : "<listcomp>";
  made->params.push_back(Param{".0", nullptr});
  std::vector<StmtPtr> clauses;  // outermost first
  const int outer = nesting_;    // each clause nests the loop one level deeper
  while (atName("for") || (!clauses.empty() && atName("if"))) {
    deeper();
    const SourceLocation loc = peek().at;
    if (atName("if")) {
      ++i_;
      auto s = stmt(StmtKind::If, loc);
      s->value = orTest();  // Python's comp_if: no conditional expression without parentheses
      clauses.push_back(s);
      continue;
    }
    ++i_;
    auto s = stmt(StmtKind::For, loc);
    s->targets.push_back(targetList());
    if (!atName("in")) fail("expected 'in' in the comprehension");
    ++i_;
    s->value = orTest();
    if (clauses.empty()) {
      made->a = s->value;
      s->value = name(".0", loc);
    }
    clauses.push_back(s);
  }
  nesting_ = outer;
  auto store = stmt(value ? StmtKind::Assign : StmtKind::Expr, element->at);
  if (value) {
    auto slot = makeExpr(ExprKind::Subscript, element->at);
    slot->a = name(".result", element->at);
    slot->b = element;
    store->targets.push_back(slot);
    store->value = value;
  } else {
    auto append = makeExpr(ExprKind::Attribute, element->at);
    append->a = name(".result", element->at);
    append->text = "append";
    auto call = makeExpr(ExprKind::Call, element->at);
    call->a = append;
    call->items.push_back(element);
    store->value = call;
  }
  StmtPtr inner = store;
  for (auto it = clauses.rbegin(); it != clauses.rend(); ++it) {
    (*it)->body.push_back(inner);
    inner = *it;
  }
  auto start = stmt(StmtKind::Assign, at);
  start->targets.push_back(name(".result", at));
  start->value = makeExpr(value ? ExprKind::Dict : ExprKind::List, at);
  auto done = stmt(StmtKind::Return, at);
  done->value = name(".result", at);
  made->body = {start, inner, done};
  return made;
}

}  // namespace shardscope::trace
