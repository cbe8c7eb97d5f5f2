#include "terminal_progress.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>

namespace shardscope::cli {

bool TerminalProgress::stderrIsTerminal() {
  return ::isatty(STDERR_FILENO) == 1;
}

TerminalProgress::TerminalProgress() : TerminalProgress(stderrIsTerminal()) {}

void TerminalProgress::clearLine() {
  if (!enabled_) return;
  std::lock_guard lock(mutex_);
  clear();
}

TerminalProgress::TerminalProgress(bool enabled) : enabled_(enabled) {
  if (enabled_) poller_ = std::thread([this] { poll(); });
}

TerminalProgress::~TerminalProgress() {
  if (!enabled_) return;
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  poller_.join();
  std::lock_guard lock(mutex_);
  clear();
}

void TerminalProgress::load(const std::string& what, int done, int total) {
  if (!enabled_) return;
  std::lock_guard lock(mutex_);
  draw("loading " + std::to_string(done) + "/" + std::to_string(total) + ": " + what);
  if (done >= total) clear();
}

void TerminalProgress::follow(const JobHandle& job, const std::string& label) {
  if (!enabled_) return;
  {
    std::lock_guard lock(mutex_);
    job_ = job;
    label_ = label;
  }
  wake_.notify_all();
}

std::string TerminalProgress::lastLine() const {
  std::lock_guard lock(mutex_);
  return last_;
}

// Callers hold mutex_.
void TerminalProgress::draw(const std::string& line) {
  last_ = line;
  std::fprintf(stderr, "\r\033[K%s", line.c_str());
  std::fflush(stderr);
  shown_ = true;
}

void TerminalProgress::clear() {
  if (!shown_) return;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
  shown_ = false;
}

void TerminalProgress::poll() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    wake_.wait_for(lock, std::chrono::milliseconds(200));
    if (!job_.state()) continue;
    if (job_.done()) {
      job_ = JobHandle();
      clear();
      continue;
    }
    const JobProgress p = job_.progress();
    draw(label_ + ": step " + std::to_string(p.step) + " of " + std::to_string(p.total));
  }
}

}  // namespace shardscope::cli
