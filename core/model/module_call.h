// ModuleCall: the arguments of a call a trace script makes into a module, either the module itself
// (`model.model.norm(h)`, Module::callWhole) or one of its methods (`qkv_proj.q_head(out, 3)`,
// ModuleMethod). Tensor level: core/model does not see trace values, so the trace layer converts
// its arguments to tensors, integers and modules, and the module takes what it needs by position.
#pragma once

#include <ATen/ATen.h>

#include <optional>
#include <string>
#include <vector>

#include "../error.h"
#include "forward_batch.h"
#include "module.h"

namespace shardscope {

// A call the script made wrongly (argument missing or of the wrong type, head out of range); the
// message names the call and says how to make it.
class ModuleCallError : public Error {
 public:
  using Error::Error;
};

struct CallArg {
  const Module* module = nullptr;  // a module passed by name (logits_processor(lm_head, h))
  at::Tensor tensor;
  std::optional<int64_t> integer;
};

class ModuleCall {
 public:
  // `callee` names the call for errors ("model.model.norm", "...qkv_proj.q_head"); `batch` is the
  // step's group and step, with no observer (a call never visits ports).
  ModuleCall(std::string callee, std::vector<CallArg> args, const ForwardBatch& batch)
      : callee_(std::move(callee)), args_(std::move(args)), batch_(batch) {}

  size_t size() const { return args_.size(); }
  const std::string& callee() const { return callee_; }
  const ForwardBatch& batch() const { return batch_; }
  // The i-th argument as a tensor / an integer / a module, else ModuleCallError naming `what`.
  const at::Tensor& tensor(size_t i, const char* what) const;
  int64_t integer(size_t i, const char* what) const;
  const Module& module(size_t i, const char* what) const;
  // The i-th argument if it is a module, else nullptr.
  const Module* moduleAt(size_t i) const { return i < args_.size() ? args_[i].module : nullptr; }

 private:
  [[noreturn]] void wrong(size_t i, const char* what, const char* expected) const;

  std::string callee_;
  std::vector<CallArg> args_;
  const ForwardBatch& batch_;
};

}  // namespace shardscope
