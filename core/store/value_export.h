// Writes a run's saved tensors as one safetensors file (readable by safetensors.torch.load_file).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "session_store.h"

namespace shardscope::store {

struct ExportReport {
  std::vector<std::string> written;  // tensor names in the file
  std::vector<std::string> skipped;  // "name: why" (summaries over the cap, non-tensor values)
};

// Tensor names are the saved names; a name saved by several traces gets "@traceN" on all but the
// last. The file is written beside `out` and renamed into place.
ExportReport exportRun(const SessionStore& store, int64_t runId, const std::filesystem::path& out);

}  // namespace shardscope::store
