// PortObserver: the one hook every module calls at each port visit. With no observer installed a
// visit costs one branch; the trace interleaver is an observer.
#pragma once

#include <ATen/ATen.h>

#include <vector>

#include "module.h"

namespace shardscope {

struct ForwardBatch;

// A port's value on this rank: one tensor, or a tuple whose undefined items are None.
// An observer that writes replaces items; the module continues with what is here afterwards.
struct PortValue {
  std::vector<at::Tensor> items;
  bool tuple = false;

  static PortValue single(at::Tensor t) { return {{std::move(t)}, false}; }
  static PortValue pair(at::Tensor a, at::Tensor b) { return {{std::move(a), std::move(b)}, true}; }
};

class PortObserver {
 public:
  virtual ~PortObserver() = default;
  virtual void visit(const Module& module, PortRole role, PortValue& value,
                     const ForwardBatch& batch) = 0;
};

}  // namespace shardscope
