// A model of deterministic random weights for the suites: a config of tests/trace/ beside the real
// Qwen3 tokenizer (scripts/fetch-assets), written into a scratch directory, named as `--model`
// and VLLM(...) take it.
#pragma once

#include <filesystem>
#include <string>

#include "core/model/model_source.h"
#include "test_support.h"

namespace shardscope::test {

// "random:DIR/config.json@SEED" for tests/trace/CONFIG copied into `dir` (made if missing) with a
// link to the tokenizer; a suite may edit DIR/config.json before the model is loaded.
inline std::string randomModelSpec(const std::filesystem::path& dir, const std::string& config,
                                   int seed = 1) {
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(sourceDir() / "tests" / "trace" / config, dir / "config.json");
  std::filesystem::create_symlink(qwen3TokenizerAsset(), dir / "tokenizer.json");
  return "random:" + (dir / "config.json").string() + "@" + std::to_string(seed);
}

}  // namespace shardscope::test
