// Where a token or node sits in a trace script, and the error type every trace failure uses.
#pragma once

#include <string>

#include "../error.h"

namespace shardscope::trace {

struct SourceLocation {
  int line = 0;
  int column = 0;  // 1-based
};

// A script error: file, line, column, the statement's text and what would work.
class ScriptError : public Error {
 public:
  ScriptError(const std::string& file, SourceLocation at, const std::string& statement,
              const std::string& message);
  // One that another process reported (an engine server's job): its text as that side wrote it.
  ScriptError(const std::string& text, SourceLocation at, std::string message);
  const std::string& message() const { return message_; }
  SourceLocation location() const { return at_; }

 private:
  SourceLocation at_;
  std::string message_;
};

}  // namespace shardscope::trace
