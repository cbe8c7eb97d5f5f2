// shardscope-cli's session-log commands: log, show, replay, diff, export (and `run --log`'s
// recording).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/trace/trace_record.h"

namespace shardscope::cli {

// "41.3 ms, 3 steps" (the unit follows the size); "not recorded" for runs of older builds.
std::string timingText(const std::optional<trace::TraceTiming>& t);

int logCommand(const std::vector<std::string>& args);
int showCommand(const std::vector<std::string>& args);
int replayCommand(const std::vector<std::string>& args);
int exportCommand(const std::vector<std::string>& args);
int diffCommand(const std::vector<std::string>& args);

}  // namespace shardscope::cli
