// Lexer for the trace language: Python 3's lexical rules (indentation blocks, comments, implicit
// line joining inside brackets, backslash continuation, numbers with _ and 0x, single/double/
// triple-quoted strings with escapes, f-strings kept whole for the parser).
#pragma once

#include <string>
#include <vector>

#include "source_location.h"

namespace shardscope::trace {

enum class TokenKind { Name, Int, Float, String, FString, Op, Newline, Indent, Dedent, End };

struct Token {
  TokenKind kind;
  std::string text;  // name, operator, or the decoded string value
  SourceLocation at;
  long long intValue = 0;
  double floatValue = 0;
  // FString: where each character of `text` stands in the source (an escape's characters at its
  // backslash), so that a field's errors can point into the field.
  std::vector<SourceLocation> charAt = {};
};

// Throws ScriptError naming `file`.
std::vector<Token> tokenize(const std::string& source, const std::string& file);

}  // namespace shardscope::trace
