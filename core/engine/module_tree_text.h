// The module tree as `shardscope-cli inspect` prints it: ports with the shard and whole shapes of
// one prompt, parameters with their shard and full shapes. Shared by the local CLI and the engine
// server, so a remote inspect prints the same text.
#pragma once

#include <string>
#include <vector>

#include "engine.h"
#include "engine_types.h"
#include "port_probe.h"

namespace shardscope {

std::string moduleTreeText(const ModelInfo& info, const std::vector<PortShape>& shapes,
                           size_t promptTokens);

// Probes `prompt` (empty: "The capital of France is"; five token ids when the model has no
// tokenizer) on `engine` and returns moduleTreeText of it. Runs a job on every rank.
std::string inspectText(Engine& engine, const std::string& prompt);

}  // namespace shardscope
