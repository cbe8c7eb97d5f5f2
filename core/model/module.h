// Module: one node of the model's module tree, named as vLLM names it so that nnsight-on-vLLM code
// reads the same. A module knows its full path, its ports (input/output, each with the way its
// value is sharded across ranks) and its parameters (this rank's shards).
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "../parallel/shard_spec.h"

namespace shardscope {

class ModuleCall;

struct PortSpec {
  std::string name;         // "input" or "output"
  ShardSpec shard;          // how every tensor of the port's value is laid out across ranks
  bool perRequest = false;  // rows are requests (logits, samples), not the step's tokens
};

// A method trace scripts can call on a module (q_head on qkv_proj, head on o_proj): tensors and
// integers in, tensors out (one is returned as a tensor, several as a tuple). Views of an argument
// stay views, so `o_proj.head(z, 3)[:] = 0` writes into z.
struct ModuleMethod {
  std::string name;   // "q_head"
  std::string usage;  // "q_head(qkv_output, head)", for error messages
  std::function<std::vector<at::Tensor>(const ModuleCall&)> call;
};

struct Parameter {
  std::string name;                // "weight", "bias"
  at::Tensor shard;                // this rank's piece
  std::vector<int64_t> fullShape;  // the unsharded shape (vocabulary padding trimmed)
  int64_t splitDim = -1;           // -1: replicated
  int replicas = 1;                // consecutive ranks holding the same shard (a DCP group)
};

enum class PortRole { Input = 0, Output = 1 };

class Module {
 public:
  Module(std::string name, Module* parent, std::optional<int64_t> index = std::nullopt);
  virtual ~Module();
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  const std::string& name() const { return name_; }
  const std::string& path() const { return path_; }  // "model.model.layers[3].self_attn"
  std::optional<int64_t> index() const { return index_; }
  Module* parent() const { return parent_; }
  const std::vector<Module*>& children() const { return children_; }
  const PortSpec& port(PortRole r) const { return ports_[int(r)]; }
  const std::vector<Parameter>& parameters() const { return params_; }
  const Parameter* parameter(const std::string& name) const;
  // The module at `relativePath` below this one ("layers[3].self_attn"), or nullptr.
  const Module* find(const std::string& relativePath) const;
  // vLLM class name, shown in the tree ("QKVParallelLinear").
  virtual const char* kind() const = 0;

  // The decoder layer this module belongs to (declared by the layer, inherited by its children);
  // nullopt outside the layers (embedding, final norm, lm_head).
  std::optional<int64_t> layer() const { return layer_; }
  // The methods trace scripts can call on this module, and one of them by name (or nullptr).
  const std::vector<ModuleMethod>& methods() const { return methods_; }
  const ModuleMethod* method(const std::string& name) const;
  // Whether a trace script can call the module itself with whole tensors (`model.model.norm(h)`);
  // callWhole runs it without visiting ports and returns its outputs.
  virtual bool callableWithWhole() const { return false; }
  virtual std::vector<at::Tensor> callWhole(const ModuleCall& call) const;
  // Whether callWhole returns one tensor whose row r depends only on row r of each tensor
  // argument (all of one row count, dim 0): calls can then run stacked as one (the trace layer
  // batches a block's calls of one module, so the logit lens reads the LM head once).
  virtual bool callRowWise() const { return false; }
  // A port a script reads by naming the module (model.logits): the name stands for its output.
  virtual bool readsAsValue() const { return false; }
  // Why the forward never visits this module's ports (lm_head: the logits processor uses its
  // weight), with what to read instead; empty for modules the forward runs.
  virtual std::string neverVisitedReason() const { return {}; }

 protected:
  void setPorts(PortSpec input, PortSpec output);
  void setPorts(ShardSpec input, ShardSpec output, bool perRequest = false);
  void addMethod(ModuleMethod m);
  // Marks this module as decoder layer `layer`; call before creating its children.
  void setLayer(int64_t layer) { layer_ = layer; }
  void addParameter(Parameter p);
  // Owned children are registered by their constructor through the parent pointer.
  template <class T, class... Args>
  T* child(Args&&... args) {
    auto m = std::make_unique<T>(std::forward<Args>(args)...);
    T* raw = m.get();
    owned_.push_back(std::move(m));
    return raw;
  }

 private:
  std::string name_;
  std::string path_;
  std::optional<int64_t> index_;
  std::optional<int64_t> layer_;
  Module* parent_;
  std::vector<Module*> children_;
  std::vector<std::unique_ptr<Module>> owned_;
  PortSpec ports_[2];
  std::vector<Parameter> params_;
  std::vector<ModuleMethod> methods_;
};

// A port that is not a layer: model.logits ([requests, V] before sampling) and model.samples
// ([requests] sampled ids), visited by the generation loop once per step.
class StepPort : public Module {
 public:
  StepPort(std::string name, Module* parent, const char* kind)
      : Module(std::move(name), parent), kind_(kind) {
    setPorts(ShardSpec::whole(), ShardSpec::whole(), true);
  }
  const char* kind() const override { return kind_; }
  bool readsAsValue() const override { return true; }

 private:
  const char* kind_;
};

// A plain container (e.g. "model.model.layers") that only groups children.
class ModuleList : public Module {
 public:
  using Module::Module;
  const char* kind() const override { return "ModuleList"; }
};

}  // namespace shardscope
