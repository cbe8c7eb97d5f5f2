#include "module.h"

#include <functional>

#include "../error.h"
#include "causal_lm.h"
#include "module_call.h"

namespace shardscope {

Module::Module(std::string name, Module* parent, std::optional<int64_t> index)
    : name_(std::move(name)), index_(index), parent_(parent) {
  if (!parent_) {
    path_ = name_;
  } else if (index_) {
    path_ = parent_->path_ + "[" + std::to_string(*index_) + "]";  // layers[3]: name is the list's
  } else {
    path_ = parent_->path_ + "." + name_;
  }
  if (parent_) {
    parent_->children_.push_back(this);
    layer_ = parent_->layer_;
  }
  ports_[0] = {"input", ShardSpec::whole()};
  ports_[1] = {"output", ShardSpec::whole()};
}

Module::~Module() = default;

void Module::setPorts(PortSpec input, PortSpec output) {
  input.name = "input";
  output.name = "output";
  ports_[0] = std::move(input);
  ports_[1] = std::move(output);
}

void Module::setPorts(ShardSpec input, ShardSpec output, bool perRequest) {
  setPorts(PortSpec{"", std::move(input), perRequest}, PortSpec{"", std::move(output), perRequest});
}

void Module::addMethod(ModuleMethod m) {
  methods_.push_back(std::move(m));
}

const ModuleMethod* Module::method(const std::string& name) const {
  for (const auto& m : methods_) {
    if (m.name == name) return &m;
  }
  return nullptr;
}

std::vector<at::Tensor> Module::callWhole(const ModuleCall&) const {
  throw ModuleCallError(path() + " (" + kind() + ") cannot be called from a trace");
}

void Module::addParameter(Parameter p) {
  params_.push_back(std::move(p));
}

const Parameter* Module::parameter(const std::string& name) const {
  for (const auto& p : params_) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

const Module* Module::find(const std::string& relativePath) const {
  if (relativePath.empty()) return this;
  const std::string full = path_ + (relativePath[0] == '[' ? "" : ".") + relativePath;
  for (const Module* c : children_) {
    if (full == c->path_) return c;
    if (full.compare(0, c->path_.size(), c->path_) == 0 &&
        (full[c->path_.size()] == '.' || full[c->path_.size()] == '[')) {
      return c->find(full.substr(c->path_.size() + (full[c->path_.size()] == '.' ? 1 : 0)));
    }
  }
  return nullptr;
}

const std::map<std::string, const Module*>& CausalLM::modulesByPath() const {
  std::call_once(indexOnce_, [this] {
    std::function<void(const Module&)> walk = [&](const Module& m) {
      index_[m.path()] = &m;
      for (const Module* c : m.children()) walk(*c);
    };
    walk(*this);
    for (const auto& [path, m] : index_) {
      numbers_[m] = int64_t(order_.size());
      order_.push_back(m);
    }
  });
  return index_;
}

int64_t CausalLM::portId(const Module& m, PortRole role) const {
  modulesByPath();
  const auto it = numbers_.find(&m);
  return it == numbers_.end() ? -1 : 2 * it->second + int64_t(role);
}

std::pair<const Module*, PortRole> CausalLM::portAt(int64_t id) const {
  modulesByPath();
  SS_ASSERT(id >= 0 && id / 2 < int64_t(order_.size()), "a port number outside the module tree");
  return {order_[size_t(id / 2)], PortRole(id % 2)};
}

}  // namespace shardscope
