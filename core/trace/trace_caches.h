// What repeats from one trace to the next, kept so that a rerun does not pay for it again: parsed
// programs (by file name and source text) and tokenized prompts (by tokenizer and text). Both are
// bounded LRUs shared by the whole process (every engine and ScriptRunner), safe from any thread.
// A cached program is the same immutable tree a fresh parse gives, so its errors carry the same
// file, line and column; sources that fail to parse are not kept (each run raises the error anew).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ast.h"

namespace shardscope {
class Tokenizer;
}

namespace shardscope::trace {

// parseProgram(source, file), remembered for the most recent sources.
std::shared_ptr<const Program> parseProgramCached(const std::string& source,
                                                  const std::string& file);

// tokenizer.encode(text), remembered per tokenizer for the most recent texts. An entry belongs to
// that tokenizer object: once it is freed its entries never match again.
std::vector<int64_t> encodePromptCached(const std::shared_ptr<const Tokenizer>& tokenizer,
                                        const std::string& text);

}  // namespace shardscope::trace
