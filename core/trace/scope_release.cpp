#include "scope_release.h"

#include <unordered_map>
#include <unordered_set>

#include "dict_view.h"
#include "interpreter.h"
#include "value.h"

namespace shardscope::trace {
namespace {

// What a walk reached: strong references, so that emptying one cannot free another still to be
// emptied.
struct Reached {
  std::vector<Value> objects;
  std::vector<std::shared_ptr<Environment>> scopes;
  std::unordered_set<const void*> seen;
};

// Collects every scope and value reachable from those given to scope() and value(), entering
// none in `stop`.
class Walk {
 public:
  Walk(Reached& into, const std::unordered_set<const void*>& stop) : into_(into), stop_(stop) {}

  void scope(const std::shared_ptr<Environment>& e) {
    if (e && enter(e.get())) scopes_.push_back(e);
  }
  void value(const Value& v) {
    if (v && enter(v.get())) values_.push_back(v);
  }
  void run() {
    while (!values_.empty() || !scopes_.empty()) {
      if (!scopes_.empty()) {
        std::shared_ptr<Environment> e = std::move(scopes_.back());
        scopes_.pop_back();
        for (const auto& [name, v] : e->vars()) value(v);
        scope(e->parent());
        into_.scopes.push_back(std::move(e));
        continue;
      }
      Value v = std::move(values_.back());
      values_.pop_back();
      for (const Value& item : v->items) value(item);
      for (const auto& [k, item] : v->dict) {
        value(k);
        value(item);
      }
      for (const auto& [name, item] : v->attributes) value(item);
      if (v->function) {
        for (const Value& d : v->function->defaults) value(d);
        scope(v->function->closure);
      }
      into_.objects.push_back(std::move(v));
    }
  }

 private:
  bool enter(const void* p) { return !stop_.count(p) && into_.seen.insert(p).second; }

  Reached& into_;
  const std::unordered_set<const void*>& stop_;
  std::vector<Value> values_;
  std::vector<std::shared_ptr<Environment>> scopes_;
};

}  // namespace

void releaseScope(const std::shared_ptr<Environment>& scope,
                  const std::vector<const Environment*>& kept) {
  if (!scope) return;
  // What outlives the run: the kept scopes and all they reach.
  Reached outlives;
  const std::unordered_set<const void*> nothing;
  {
    Walk walk(outlives, nothing);
    for (const Environment* e : kept) {
      if (!e || !outlives.seen.insert(e).second) continue;
      for (const auto& [name, v] : e->vars()) walk.value(v);
      walk.scope(e->parent());
    }
    walk.run();
  }
  Reached run;
  {
    Walk walk(run, outlives.seen);
    walk.scope(scope);
    walk.run();
  }
  outlives = {};
  // Only what holds something is written: None, True and an Ellipsis are objects every runner and
  // rank thread shares, and reach this walk like any value.
  for (const auto& e : run.scopes) {
    if (!e->vars().empty()) e->vars().clear();
  }
  for (const Value& v : run.objects) {
    if (!v->items.empty()) v->items.clear();
    if (!v->dict.empty()) v->dict.clear();
    if (!v->attributes.empty()) v->attributes.clear();
    if (v->function) v->function.reset();
  }
}

namespace {

bool isContainer(const Value& v) {
  return v && (v->type == Type::List || v->type == Type::Tuple || v->type == Type::Dict ||
               isDictView(v->type));
}

template <typename Visit>
void forEachChild(const Object& o, const Visit& visit) {
  for (const Value& item : o.items) visit(item);
  for (const auto& [k, item] : o.dict) {
    visit(k);
    visit(item);
  }
}

}  // namespace

void releaseContainers(std::vector<Value> roots) {
  // Every container reachable from the roots through containers, with the references to it from
  // the roots and from those containers.
  std::vector<Value> found;
  std::unordered_map<const Object*, long> inside;
  const auto note = [&](const Value& v) {
    if (!isContainer(v)) return;
    const auto [it, fresh] = inside.try_emplace(v.get(), 0);
    ++it->second;
    if (fresh) found.push_back(v);
  };
  for (const Value& r : roots) note(r);
  for (size_t i = 0; i < found.size(); ++i) {  // `found` grows
    const Object* o = found[i].get();
    forEachChild(*o, note);
  }
  // Held from outside: more references than found's own and those counted inside. What such a
  // container reaches stays too.
  std::unordered_set<const Object*> alive;
  std::vector<const Object*> pending;
  for (const Value& v : found) {
    if (v.use_count() - 1 > inside[v.get()] && alive.insert(v.get()).second)
      pending.push_back(v.get());
  }
  while (!pending.empty()) {
    const Object* o = pending.back();
    pending.pop_back();
    forEachChild(*o, [&](const Value& child) {
      if (isContainer(child) && alive.insert(child.get()).second) pending.push_back(child.get());
    });
  }
  roots.clear();
  for (const Value& v : found) {
    if (alive.count(v.get())) continue;
    if (!v->items.empty()) v->items.clear();
    if (!v->dict.empty()) v->dict.clear();
  }
}

}  // namespace shardscope::trace
