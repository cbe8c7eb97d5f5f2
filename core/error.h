// Error types shared by every core layer. User errors carry a message that says what failed, where
// (file, tensor, module path, rank) and what would work instead; internal invariants use SS_ASSERT.
#pragma once

#include <exception>
#include <stdexcept>
#include <string>

namespace shardscope {

// A failure the user can act on (bad checkpoint, bad argument, bad script).
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A checkpoint or config that does not match what the model needs.
class CheckpointError : public Error {
 public:
  using Error::Error;
};

// A collective that was aborted because another rank failed or the job was cancelled.
class CollectiveAborted : public Error {
 public:
  using Error::Error;
};

// A collective that did not complete within the group's timeout (the watchdog); the message names
// the collective, its layer or port, and what every rank was waiting on.
class CollectiveTimeout : public Error {
 public:
  using Error::Error;
};

// A job stopped by its caller.
class Cancelled : public Error {
 public:
  using Error::Error;
};

// Whether e holds a CollectiveAborted (an abort another rank's failure caused, not a root cause).
bool isCollectiveAborted(const std::exception_ptr& e);

[[noreturn]] void failInvariant(const char* expr, const char* file, int line,
                                const std::string& what);

}  // namespace shardscope

// Internal invariant: a broken one is a bug in ShardScope, reported with file and line.
#define SS_ASSERT(cond, what)                                                    \
  do {                                                                           \
    if (!(cond)) ::shardscope::failInvariant(#cond, __FILE__, __LINE__, (what)); \
  } while (0)
