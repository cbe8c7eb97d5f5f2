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
  addNamesMentioned(e->body, out);
}

}  // namespace

void addFreeNames(const FunctionDef& f, std::set<std::string>& out) {
  std::set<std::string> mentioned;
  addNamesMentioned(f.body, mentioned);
  addNames(f.lambdaBody, mentioned);
  for (const Param& p : f.params) mentioned.erase(p.name);
  out.insert(mentioned.begin(), mentioned.end());
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
