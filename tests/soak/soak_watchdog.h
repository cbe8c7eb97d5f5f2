// Watchdog: a deadline for one piece of work that may hang (a trace script at tp=2 over NCCL).
// A thread of its own waits for the deadline; if the work has not disarmed it by then, the
// timeout handler runs on the watchdog's thread with the text given to arm(). The default handler
// prints that text to stderr and ends the process with exit code 124, because a hung collective
// cannot be interrupted from outside and the soak must never wait forever.
// Threading: arm() and disarm() are called from one thread (the one running the work).
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace shardscope::soak {

class Watchdog {
 public:
  using OnTimeout = std::function<void(const std::string& what)>;

  explicit Watchdog(OnTimeout onTimeout = {});
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Starts a deadline `seconds` from now, replacing any other; `what` goes to the handler.
  void arm(double seconds, std::string what);
  void disarm();

  // The default handler: `what` on stderr, then std::_Exit(124).
  static void exitProcess(const std::string& what);

 private:
  void loop();

  OnTimeout onTimeout_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool armed_ = false;
  unsigned long generation_ = 0;
  std::chrono::steady_clock::time_point deadline_;
  std::string what_;
  std::thread thread_;
};

}  // namespace shardscope::soak
