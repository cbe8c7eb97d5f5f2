#include "scope_release.h"

#include <unordered_map>
#include <unordered_set>
#include <variant>

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

void releaseScopes(const std::vector<std::shared_ptr<Environment>>& scopes,
                   const std::vector<const Environment*>& kept) {
  if (scopes.empty()) return;
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
    for (const auto& scope : scopes) walk.scope(scope);
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

// A node of the graph releaseCycles counts: a value that holds values, a function's definition, or
// one of the scopes it was handed. The node list holds each strongly while it is counted.
using Node = std::variant<Value, std::shared_ptr<FunctionDef>, std::shared_ptr<Environment>>;

const void* address(const Node& n) {
  return std::visit([](const auto& p) -> const void* { return p.get(); }, n);
}

long useCount(const Node& n) {
  return std::visit([](const auto& p) { return long(p.use_count()); }, n);
}

// Calls visit with each reference the node holds.
template <typename Visit>
void forEachChild(const Node& n, const Visit& visit) {
  if (const auto* v = std::get_if<Value>(&n)) {
    const Object& o = **v;
    for (const Value& item : o.items) visit(item);
    for (const auto& [k, item] : o.dict) {
      visit(k);
      visit(item);
    }
    for (const auto& [name, item] : o.attributes) visit(item);
    if (o.function) visit(o.function);
  } else if (const auto* f = std::get_if<std::shared_ptr<FunctionDef>>(&n)) {
    for (const Value& d : (*f)->defaults) visit(d);
    visit((*f)->closure);
  } else {
    const Environment& e = *std::get<std::shared_ptr<Environment>>(n);
    for (const auto& [name, item] : e.vars()) visit(item);
    visit(e.parent());
  }
}

// Empties a node, so that what it held goes with its last reference.
void clear(const Node& n) {
  if (const auto* v = std::get_if<Value>(&n)) {
    Object& o = **v;
    if (!o.items.empty()) o.items.clear();
    if (!o.dict.empty()) o.dict.clear();
    if (!o.attributes.empty()) o.attributes.clear();
    if (o.function) o.function.reset();
  } else if (const auto* f = std::get_if<std::shared_ptr<FunctionDef>>(&n)) {
    (*f)->defaults.clear();
    (*f)->closure.reset();
  } else {
    std::get<std::shared_ptr<Environment>>(n)->vars().clear();
  }
}

// Every node reachable from what note() is given, with the references to each from those given and
// from the nodes found.
class Graph {
 public:
  explicit Graph(const std::vector<std::shared_ptr<Environment>>& scopes) {
    for (const auto& s : scopes) handed_.insert(s.get());
  }

  void note(const Value& v) {
    if (v && holdsValues(*v)) add(v);
  }
  void note(const std::shared_ptr<FunctionDef>& f) {
    if (f) add(f);
  }
  // A scope not handed over is outside: a driver's globals, the builtins.
  void note(const std::shared_ptr<Environment>& e) {
    if (e && handed_.count(e.get())) add(e);
  }

  void expand() {
    for (size_t i = 0; i < nodes_.size(); ++i) {  // nodes_ grows
      // A copy: note() appends to nodes_, which may move what a reference into it would see.
      const Node n = nodes_[i];
      if (entered(n)) forEachChild(n, [this](const auto& child) { note(child); });
    }
  }

  // Held from outside: more references than the node list's own and those counted from what was
  // noted and from the nodes found (the caller's roots still hold theirs). What such a node reaches
  // stays too; every other node is emptied.
  void clearUnheld() {
    std::vector<bool> alive(nodes_.size(), false);
    std::vector<size_t> pending;
    for (size_t i = 0; i < nodes_.size(); ++i) {
      if (useCount(nodes_[i]) - 1 > inside_[i]) {
        alive[i] = true;
        pending.push_back(i);
      }
    }
    while (!pending.empty()) {
      const size_t i = pending.back();
      pending.pop_back();
      if (!entered(nodes_[i])) continue;
      forEachChild(nodes_[i], [&](const auto& child) {
        const auto it = index_.find(child.get());
        if (it == index_.end() || alive[it->second]) return;
        alive[it->second] = true;
        pending.push_back(it->second);
      });
    }
    for (size_t i = 0; i < nodes_.size(); ++i) {
      if (!alive[i]) clear(nodes_[i]);
    }
  }

 private:
  void add(Node n) {
    const auto [it, fresh] = index_.try_emplace(address(n), nodes_.size());
    if (fresh) {
      nodes_.push_back(std::move(n));
      inside_.push_back(0);
    }
    ++inside_[it->second];
  }

  // A function made outside the handed scopes (a driver's, whose defaults the driver and other
  // ranks may use) is a node, so what it holds counts as held from outside, but it is not entered.
  bool entered(const Node& n) const {
    const auto* f = std::get_if<std::shared_ptr<FunctionDef>>(&n);
    return !f || handed_.count((*f)->closure.get());
  }

  std::unordered_set<const void*> handed_;
  std::vector<Node> nodes_;
  std::vector<long> inside_;
  std::unordered_map<const void*, size_t> index_;
};

}  // namespace

void releaseCycles(std::vector<Value> roots, std::vector<std::shared_ptr<Environment>> scopes) {
  Graph graph(scopes);
  for (const Value& r : roots) graph.note(r);
  for (const auto& s : scopes) graph.note(s);
  graph.expand();
  graph.clearUnheld();  // roots and scopes still hold what they held: their references count
}

}  // namespace shardscope::trace
