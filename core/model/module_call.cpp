#include "module_call.h"

namespace shardscope {

void ModuleCall::wrong(size_t i, const char* what, const char* expected) const {
  throw ModuleCallError(callee_ + "(): argument " + std::to_string(i + 1) + " (" + what +
                        ") must be " + expected + (i < args_.size() ? "" : ", and it is missing"));
}

const at::Tensor& ModuleCall::tensor(size_t i, const char* what) const {
  if (i >= args_.size() || !args_[i].tensor.defined()) wrong(i, what, "a tensor");
  return args_[i].tensor;
}

int64_t ModuleCall::integer(size_t i, const char* what) const {
  if (i >= args_.size() || !args_[i].integer) wrong(i, what, "an int");
  return *args_[i].integer;
}

const Module& ModuleCall::module(size_t i, const char* what) const {
  if (i >= args_.size() || !args_[i].module) wrong(i, what, "a module");
  return *args_[i].module;
}

}  // namespace shardscope
