// Port probe: runs one forward step of a prompt and records the shape of every port visit on
// rank 0 (this rank's shard) together with the shape a gathered read would have. Used by
// `shardscope-cli inspect` and the GUI's module tree.
#pragma once

#include <string>
#include <vector>

#include "engine.h"

namespace shardscope {

struct PortShape {
  std::string module;  // "model.model.layers[0].self_attn.qkv_proj"
  std::string port;    // "input" / "output"
  std::string shardKind;
  std::vector<std::vector<int64_t>> shard;  // per tuple item on rank 0 (empty for None)
  std::vector<std::vector<int64_t>> whole;  // per tuple item after gathering
  bool tuple = false;
};

// Blocks until done; throws the job's error.
std::vector<PortShape> probePortShapes(Engine& engine, const std::vector<int64_t>& promptIds);

// "torch.Size([5, 6144])"-style text for a shape; "None" for an empty one.
std::string formatShape(const std::vector<int64_t>& shape);

}  // namespace shardscope
