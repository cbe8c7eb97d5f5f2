#include "soak_watchdog.h"

#include <cstdio>
#include <cstdlib>

namespace shardscope::soak {

Watchdog::Watchdog(OnTimeout onTimeout)
    : onTimeout_(onTimeout ? std::move(onTimeout) : OnTimeout(&Watchdog::exitProcess)),
      thread_([this] { loop(); }) {}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Watchdog::arm(double seconds, std::string what) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    armed_ = true;
    ++generation_;
    deadline_ = std::chrono::steady_clock::now() +
                std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                    std::chrono::duration<double>(seconds));
    what_ = std::move(what);
  }
  cv_.notify_all();
}

void Watchdog::disarm() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    armed_ = false;
    ++generation_;
  }
  cv_.notify_all();
}

void Watchdog::exitProcess(const std::string& what) {
  std::fprintf(stderr, "%s\n", what.c_str());
  std::fflush(stderr);
  std::fflush(stdout);
  std::_Exit(124);
}

void Watchdog::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_) {
    if (!armed_) {
      cv_.wait(lock, [this] { return stop_ || armed_; });
      continue;
    }
    const unsigned long generation = generation_;
    const auto deadline = deadline_;
    if (cv_.wait_until(lock, deadline, [&] { return stop_ || generation_ != generation; }))
      continue;  // disarmed, re-armed or stopping
    armed_ = false;
    const std::string what = what_;
    lock.unlock();
    onTimeout_(what);
    lock.lock();
  }
}

}  // namespace shardscope::soak
