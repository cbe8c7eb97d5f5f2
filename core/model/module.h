// Module: one node of the model's module tree, named as vLLM names it so that nnsight-on-vLLM code
// reads the same. A module knows its full path, its ports (input/output, each with the way its
// value is sharded across ranks) and its parameters (this rank's shards).
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace shardscope {

// How a port's value is laid out across tensor-parallel ranks (SPEC section 2).
enum class ShardKind {
  Whole,        // every rank holds the whole value
  Column,       // split along the last dimension, gathered in rank order
  FusedColumn,  // several column outputs fused (qkv, gate_up): gathered in rank order
  RowInput,     // input of a row-parallel layer: split along the last dimension
  Head,         // split by attention heads (dimension 1 of [T, heads, d], or last of [T, heads*d])
  PartialSum,   // each rank holds a partial sum; reading all-reduces
  Vocab,        // split along the vocabulary
};

const char* shardKindName(ShardKind k);

struct PortSpec {
  std::string name;  // "input" or "output"
  ShardKind kind = ShardKind::Whole;
  int64_t splitDim = -1;  // dimension the shards are cut along (for split kinds)
  int replicas = 1;       // ranks holding each distinct shard (KV heads replicated when tp > n_kv)
  bool perRequest = false;  // rows are requests (logits, samples), not the step's tokens
};

struct Parameter {
  std::string name;                // "weight", "bias"
  at::Tensor shard;                // this rank's piece
  std::vector<int64_t> fullShape;  // the unsharded shape (vocabulary padding trimmed)
  int64_t splitDim = -1;           // -1: replicated
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
  // Ranks that hold each distinct shard of the ports (KV heads replicated when tp > n_kv).
  void setReplicas(int replicas);
  // vLLM class name, shown in the tree ("QKVParallelLinear").
  virtual const char* kind() const = 0;

 protected:
  void setPorts(PortSpec input, PortSpec output);
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
  Module* parent_;
  std::vector<Module*> children_;
  std::vector<std::unique_ptr<Module>> owned_;
  PortSpec ports_[2];
  std::vector<Parameter> params_;
};

// A port that is not a layer: model.logits ([requests, V] before sampling) and model.samples
// ([requests] sampled ids), visited by the generation loop once per step.
class StepPort : public Module {
 public:
  StepPort(std::string name, Module* parent, const char* kind)
      : Module(std::move(name), parent), kind_(kind) {
    PortSpec p{"", ShardKind::Whole, -1, 1, true};
    setPorts(p, p);
  }
  const char* kind() const override { return kind_; }

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
