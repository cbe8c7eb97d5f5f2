// What one run of a trace script produced, as plain C++ data (no LibTorch): the models it loaded,
// and per `with model.trace(...)` block the sampling, each request's prompt and generation, and
// every saved value. The session store persists it; replay compares two of them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "../engine/engine_types.h"
#include "../host_tensor.h"

namespace shardscope::trace {

// A model as the script named it, and what identifies the weights it ran on.
struct ModelIdentity {
  std::string name;          // the script's VLLM("NAME") argument
  std::string spec;          // what the engine loaded (path, HF name, random:..., "" = demo)
  std::string path;          // resolved checkpoint directory
  std::string configSha256;  // of config.json
  std::string dtype;
  std::string device;
  std::string backend;
  int tp = 1;
  std::string engineVersion;
  bool expertParallel = false;  // enable_expert_parallel: each rank holds whole experts (MoE)
};

// Statistics kept in place of a value too large to store.
struct ValueSummary {
  double min = 0, max = 0, mean = 0, norm = 0;
  int64_t nonFinite = 0;  // NaN and infinities, left out of the statistics above
};

// One value a block saved. A tensor keeps its dtype, shape and bytes, unless it was larger than
// the store's cap: then `bytes` is empty and `summary` and `note` say what it was. A non-tensor
// value (number, string, list of numbers) is kept as its repr.
struct SavedValue {
  std::string name;  // the script's name; tuple and list items as name[0], name[1], ...
  HostTensor tensor;
  std::optional<std::string> repr;  // set for non-tensor values
  std::optional<ValueSummary> summary;
  std::string note;

  bool isTensor() const { return !repr.has_value(); }
  bool hasData() const { return isTensor() && !summary.has_value(); }
};

// One request: an invoke of one prompt has one, an invoke of a batch of prompts one a prompt.
struct InvokeRecord {
  std::vector<int64_t> promptIds;
  std::vector<int64_t> tokenIds;  // generated
  std::string text;  // generated, as Tokenizer::displayText shows it (ids without a token as
                     // `<|id N|>`; empty without a tokenizer)
  std::string finishReason;
};

// How long one `with model.trace(...)` block took: wall time from entering the block to its
// results being back on the driver (prompts, generation, interventions, copies), and the
// generation steps it ran. Absent in runs recorded before session schema 3.
struct TraceTiming {
  double wallSeconds = 0;
  int64_t steps = 0;
};

struct TraceRecord {
  int modelIndex = 0;  // into RunResult::models
  SamplingParams sampling;
  std::optional<TraceTiming> timing;
  std::vector<InvokeRecord> invokes;
  std::vector<SavedValue> values;
};

struct RunResult {
  std::vector<ModelIdentity> models;
  std::vector<TraceRecord> traces;
  std::string printed;  // everything the script printed, one line each
};

}  // namespace shardscope::trace
