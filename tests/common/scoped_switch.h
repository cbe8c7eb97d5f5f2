// ScopedSwitch: sets one SHARDSCOPE_* switch (core/runtime_switches.h) for its lifetime, for a test
// that compares settings in one process: it sets the variable and rereads the switches, then puts
// the variable back as it was and rereads them again.
#pragma once

#include <cstdlib>
#include <optional>
#include <string>

#include "core/runtime_switches.h"

namespace shardscope::test {

class ScopedSwitch {
 public:
  // value nullptr: unset (the switch's default).
  ScopedSwitch(std::string variable, const char* value) : variable_(std::move(variable)) {
    if (const char* before = std::getenv(variable_.c_str())) before_ = before;
    try {
      set(value);
    } catch (...) {  // a value the switch does not take: leave the environment as it was
      set(before_ ? before_->c_str() : nullptr);
      throw;
    }
  }
  ~ScopedSwitch() { set(before_ ? before_->c_str() : nullptr); }
  ScopedSwitch(const ScopedSwitch&) = delete;
  ScopedSwitch& operator=(const ScopedSwitch&) = delete;

 private:
  void set(const char* value) {
    if (value) {
      ::setenv(variable_.c_str(), value, 1);
    } else {
      ::unsetenv(variable_.c_str());
    }
    RuntimeSwitches::reload();
  }

  std::string variable_;
  std::optional<std::string> before_;
};

}  // namespace shardscope::test
