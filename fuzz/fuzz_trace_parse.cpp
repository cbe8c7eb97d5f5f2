// Fuzz target: the trace language's lexer and parser. The input is a script; parseProgram must
// return a syntax tree or throw ScriptError (with a line and column).
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/trace/ast.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string source(reinterpret_cast<const char*>(data), size);
  shardscope::fuzz::expectRefusalOrSuccess(
      [&] { shardscope::trace::parseProgram(source, "fuzz.py"); });
  return 0;
}
