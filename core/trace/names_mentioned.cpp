#include "names_mentioned.h"

#include "value.h"

namespace shardscope::trace {
namespace {

void addNames(const ExprPtr& e, std::set<std::string>& out);

void addParams(const std::vector<Param>& params, std::set<std::string>& out) {
  for (const Param& p : params) addNames(p.defaultValue, out);
}

void addNames(const ExprPtr& e, std::set<std::string>& out) {
  if (!e) return;
  if (e->kind == ExprKind::Name) out.insert(e->text);
  addNames(e->a, out);
  addNames(e->b, out);
  addNames(e->c, out);
  for (const auto& i : e->items) addNames(i, out);
  for (const auto& v : e->values) addNames(v, out);
  addParams(e->params, out);
}

// The names a target binds: a name, or the names in a tuple or list of targets (not an
// attribute or an item, which bind nothing).
void addTargetNames(const ExprPtr& e, std::set<std::string>& out) {
  if (!e) return;
  if (e->kind == ExprKind::Name) out.insert(e->text);
  if (e->kind == ExprKind::Tuple || e->kind == ExprKind::List) {
    for (const auto& i : e->items) addTargetNames(i, out);
  }
}

// The names `block` binds in its own scope: not inside the functions it defines.
void addNamesBound(const Block& block, std::set<std::string>& out) {
  for (const StmtPtr& s : block) {
    for (const auto& t : s->targets) addTargetNames(t, out);
    if (s->kind == StmtKind::Def) {
      out.insert(s->op);
      continue;
    }
    if (s->kind == StmtKind::Import) {
      if (!s->targets.empty())  // from X import a, b
        out.insert(s->names.begin(), s->names.end());
      else
        out.insert(s->names.empty() ? s->op.substr(0, s->op.find('.')) : s->names[0]);
    }
    addNamesBound(s->body, out);
    addNamesBound(s->orElse, out);
  }
}

}  // namespace

void addFreeNames(const FunctionDef& f, std::set<std::string>& out) {
  std::set<std::string> mentioned, local;
  addNamesMentioned(f.body, mentioned);
  addNames(f.lambdaBody, mentioned);
  for (const Param& p : f.params) local.insert(p.name);
  addNamesBound(f.body, local);
  for (const auto& name : mentioned) {
    if (!local.count(name)) out.insert(name);
  }
}

void addNamesMentioned(const Block& block, std::set<std::string>& out) {
  for (const StmtPtr& s : block) {
    for (const auto& t : s->targets) addNames(t, out);
    addNames(s->value, out);
    addNames(s->message, out);
    addParams(s->params, out);
    if (s->kind == StmtKind::Def) out.insert(s->op);
    if (s->kind == StmtKind::Import) {  // `import torch` reads torch; `from vllm import X` reads X
      if (s->targets.empty()) out.insert(s->op.substr(0, s->op.find('.')));
      out.insert(s->names.begin(), s->names.end());
    }
    addNamesMentioned(s->body, out);
    addNamesMentioned(s->orElse, out);
  }
}

}  // namespace shardscope::trace
