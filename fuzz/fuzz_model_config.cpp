// Fuzz target: a checkpoint's config.json. The input is the file's text; ModelConfig::parse must
// accept it or refuse it with a CheckpointError, and an accepted config must answer
// checkTensorParallel for the sizes a user can ask for.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/model/model_config.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  shardscope::fuzz::expectRefusalOrSuccess([&] {
    const auto config = shardscope::ModelConfig::parse(text, "config.json");
    for (int tp : {0, 1, 2, 3, 4, 8}) {
      shardscope::fuzz::expectRefusalOrSuccess([&] { config.checkTensorParallel(tp); });
    }
  });
  return 0;
}
