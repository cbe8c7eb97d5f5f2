// The example scripts' bytes, written into examples_data.cpp by embed_examples.cmake at build time.
#pragma once

#include <cstddef>

namespace shardscope::examples {

struct EmbeddedExample {
  const char* name;    // file stem
  const char* source;  // file contents
};

extern const EmbeddedExample kEmbeddedExamples[];
extern const size_t kEmbeddedExampleCount;

}  // namespace shardscope::examples
