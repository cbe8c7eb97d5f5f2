// TerminalProgress: one self-updating status line on stderr for the CLI's long steps (loading a
// model, generating), shown only when stderr is a terminal: in a pipe or a log file it prints
// nothing, so captured output stays clean. The line is cleared when the step ends.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "core/engine/engine.h"

namespace shardscope::cli {

class TerminalProgress {
 public:
  // `enabled` defaults to whether stderr is a terminal.
  TerminalProgress();
  explicit TerminalProgress(bool enabled);
  ~TerminalProgress();
  TerminalProgress(const TerminalProgress&) = delete;
  TerminalProgress& operator=(const TerminalProgress&) = delete;

  static bool stderrIsTerminal();
  bool enabled() const { return enabled_; }
  // Clears the status line (before other output); the next update draws it again.
  void clearLine();
  // For Engine::LoadProgress: "loading 3/9: layer 2".
  void load(const std::string& what, int done, int total);
  // Shows `label` with the job's step count until the job ends (polled on a background thread).
  void follow(const JobHandle& job, const std::string& label);
  // The line as it was last drawn (for tests).
  std::string lastLine() const;

 private:
  void draw(const std::string& line);
  void clear();
  void poll();

  const bool enabled_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  JobHandle job_;
  std::string label_, last_;
  bool stopping_ = false;
  bool shown_ = false;
  std::thread poller_;
};

}  // namespace shardscope::cli
