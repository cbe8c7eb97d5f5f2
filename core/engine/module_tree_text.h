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

// The token ids a probe of `prompt` uses: its encoding (empty: "The capital of France is"), or five
// token ids when the model has no tokenizer.
std::vector<int64_t> probeIds(const Engine& engine, const std::string& prompt);

// Probes `prompt` (see probeIds) on `engine` and returns moduleTreeText of it. Runs a job on every
// rank.
std::string inspectText(Engine& engine, const std::string& prompt);

}  // namespace shardscope
