// shardscope-cli's session-log commands: log, show, replay, export (and `run --log`'s recording).
#pragma once

#include <string>
#include <vector>

namespace shardscope::cli {

int logCommand(const std::vector<std::string>& args);
int showCommand(const std::vector<std::string>& args);
int replayCommand(const std::vector<std::string>& args);
int exportCommand(const std::vector<std::string>& args);

}  // namespace shardscope::cli
